"""Django's PostgreSQL backend with the connection pool's cheaper check (``base``)."""
