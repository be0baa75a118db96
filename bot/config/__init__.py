"""Configuration, read and checked once at start: what the process is told.

Owns: the settings from the environment and secret files (settings: every bad value one clear
line), and the hand-edited spend policy file (policy_file, read with policy_yaml's node-by-node
primitives: every mistake with its line), which builds the domain's `Policy`.
May import: bot.domain, bot.slack.pacing (the one parser of SLACK_RATE_LIMITS), storage.sealing
(the workload key); never bot.app.
"""
