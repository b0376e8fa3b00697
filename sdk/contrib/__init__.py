"""Optional integrations (Temporal's ``contrib`` names): ``sdk.contrib.pydantic``."""
