"""Serve the dashboard from your own ASGI server, with the shared token from the environment."""

import os

import uvicorn

from shepherd import App
from shepherd.dashboard import check_exposure, create_dashboard

app = App("sqlite:///shop.db", alerts=())
HOST = os.environ.get("DASHBOARD_HOST", "127.0.0.1")
TOKEN = os.environ.get("SHEPHERD_DASHBOARD_TOKEN")

check_exposure(HOST, TOKEN)  # the rule of `shepherd dashboard`: a token off loopback
site = create_dashboard(app, token=TOKEN)

if __name__ == "__main__":
    uvicorn.run(site, host=HOST, port=8080)
