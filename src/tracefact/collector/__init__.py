"""The tracefact collector: OTLP in, the same pipeline as the SDK, OTLP out."""
