"""The broker: asyncio over the sans-IO protocol and the managed ledger, in rooms by
responsibility. service.py composes them; admin and standalone use this package's face."""
