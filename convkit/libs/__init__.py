"""libs."""
