"""The dead-letter console: static HTML/JS/CSS served by the admin server (routes.py)."""
