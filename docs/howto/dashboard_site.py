"""Serve the dashboard from your own ASGI server, with the shared token from the environment."""

import os

import uvicorn

from shepherd import App
from shepherd.dashboard import Reach, check_exposure, create_dashboard

app = App("sqlite:///shop.db", alerts=())
HOST = os.environ.get("DASHBOARD_HOST", "127.0.0.1")
TOKEN = os.environ.get("SHEPHERD_DASHBOARD_TOKEN")
PUBLIC_URL = os.environ.get("DASHBOARD_PUBLIC_URL")  # https://ops.example.com behind a proxy

# The rules of `shepherd dashboard`: a token of 16 characters or more off loopback.
check_exposure(HOST, TOKEN, public_url=PUBLIC_URL)
# The names it answers to: the loopback names, HOST, the public URL's host.
reach = Reach.of(host=HOST, public_url=PUBLIC_URL)
site = create_dashboard(app, token=TOKEN, reach=reach)

if __name__ == "__main__":
    uvicorn.run(site, host=HOST, port=8080)
