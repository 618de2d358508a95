"""A scratch PostgreSQL database for one benchmark run, dropped afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlalchemy import create_engine, text


def scratch_database(admin_url: str, prefix: str) -> tuple[str, Callable[[], None]]:
    """(the URL of a new, empty database on `admin_url`'s server, a function that drops it)."""
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return admin.url.set(database=name).render_as_string(hide_password=False), drop
