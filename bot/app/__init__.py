"""The process, wired together: what `cluster-bot` (and `python -m bot`) runs.

Owns: the command line (cli), the one place everything is built and stopped (runtime), the two
HTTP listeners (listeners), /healthz and /readyz (health), SIGHUP's policy reload (reload), the
Slack Web API client as the bot uses it (slack_client), and the one seam to the development tools
(devtools: the only module of bot/ and storage/ that imports aireserve_sim or devslack).
May import: everything of bot/ and storage/; aireserve_sim and devslack through devtools only.
"""
