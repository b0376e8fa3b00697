"""Chronicle's Python SDK: workflows, activities, a worker and a client over HTTP (no Django).

Import the parts you need: ``from sdk import activity, workflow``, ``from sdk.client import
Client``, ``from sdk.worker import Worker``.
"""

__version__ = "0.1.0"
