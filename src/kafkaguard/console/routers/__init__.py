"""The console's routers, one per resource."""
