"""The deterministic workflow runtime: event loop, instance, replay matching."""
