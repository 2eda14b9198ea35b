"""Providers: who answers the Jev questions (mock, live Jev over HTTP) and baseline judges."""

from ragbatch.providers.base import Call, Provider, Reply

__all__ = ["Call", "Provider", "Reply"]
