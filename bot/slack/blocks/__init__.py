"""Block Kit builders: pure functions from domain models to `slack_sdk.models` blocks.

Owns: what people see in a message, a modal or the App Home, and nothing else (no I/O).
May import: bot.domain, bot.slack.ids, bot.slack.blocks, the value objects of bot.services.
"""
