"""Temporal's API message types that user code is written against (``sdk.api.common.v1.Payload``).

Only the messages a ported program touches live here; the server speaks JSON, not protobuf.
"""
