"""The Supervisor role: the lease holder finds expired claims and applies the core's decision.

`supervisor` holds the leadership lease and the scan loop, `retention` the
passes that delete ended tasks (run by the leader, and by `shepherd purge`).
"""

from __future__ import annotations

from shepherd.supervisor.supervisor import Supervisor

__all__ = ["Supervisor"]
