"""Helpers shared by test folders: job files, projects and fixtures that more than one app's
tests use."""
