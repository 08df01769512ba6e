"""Several servers' gtui queues in one view, over the user's own ssh: the hosts' list
(config), the ssh calls (transport), each host's last known state (remote) and the actions
routed to a host (actions). Nothing here imports textual; the dashboard is fleet.ui."""
