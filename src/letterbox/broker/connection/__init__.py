"""One handler per client connection: a thin asyncio adapter over the sans-IO protocol, its
guards, flow control and the handlers of each kind of request."""
