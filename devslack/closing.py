"""`async with` for devslack's clients, said once: entering gives the client, leaving closes it."""

from __future__ import annotations

from typing import Self


class Closing:
    """A client that `async with` closes (`aclose`) on the way out, whatever happened inside."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
