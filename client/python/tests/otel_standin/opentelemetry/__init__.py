"""A stand-in for the few `opentelemetry` API calls lakeshore/tracing.py makes, for tests only:
the real package is optional and cannot be installed on the machines CI runs on (no PyPI). It
records spans so a test can check how lakeshore calls the API; test_otel_real checks the same
against the real SDK wherever it is installed."""
