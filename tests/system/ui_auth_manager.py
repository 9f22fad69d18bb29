"""The auth manager of the CDC page's system tests: Airflow's SimpleAuthManager (its users, login
and tokens), with one policy change a real deployment makes with its own auth manager - role
``user`` may read connections but not edit them. SimpleAuthManager knows no such user (reading
and editing connections both need role ``op``), and the page must be seen by one: the instances
shown, no action offered, 403 from the action endpoint. Configured through
``AIRFLOW__CORE__AUTH_MANAGER``, as any auth manager is."""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


class ConnectionReadersAuthManager(SimpleAuthManager):
    def is_authorized_connection(self, *, method: Any, user: Any, details: Any = None) -> bool:
        if method == "GET" and (user.role or "").upper() == "USER":
            return True
        return super().is_authorized_connection(method=method, user=user, details=details)
