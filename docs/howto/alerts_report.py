"""The on-call script: print the open alerts and acknowledge each one."""

import asyncio

from shepherd import App

app = App(alerts=())  # the store: SHEPHERD_STORE, or shepherd.db here


async def main() -> None:
    async with app:
        for alert in await app.alerts(open_only=True):
            print(f"alert {alert.id}: {alert.workflow} {alert.key}: {alert.reason}")
            done = await app.acknowledge_alert(alert.id, by="on-call")
            print(f"  acknowledged by {done.acknowledged_by}")


asyncio.run(main())
