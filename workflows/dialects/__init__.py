"""Dialects: how each toolset words and shapes the engine's answers on its wire."""
