"""Django's SQLite backend, with the one change ``base`` describes."""
