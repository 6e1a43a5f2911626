"""Token calibrations (T5): read a model's factor, fold one more observation in.

An observation is a read-modify-write of one row, created first if missing. On PostgreSQL the read locks
the row (``FOR UPDATE``) so two instances recording at once both count; SQLite serializes writers anyway.
The estimator itself is the core's pure :func:`contextshift.core.calibration.weigh`: a doubted report (a
suspected truncation) changes nothing and one call moves the factor only a bounded step.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.calibration import Calibration, weigh
from ..tables import TokenCalibrationRow
from ..types import utcnow
from ._common import dialect_insert


def _of(row: TokenCalibrationRow | None) -> Calibration:
    if row is None:
        return Calibration()
    return Calibration(factor=row.factor, calls=row.calls, spread=row.spread)


class CalibrationRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, model_id: str, profile: str) -> Calibration:
        """The model's calibration under ``profile`` (``Calibration()`` before its first call)."""
        row = await self.session.get(TokenCalibrationRow, (model_id, profile), populate_existing=True)
        return _of(row)

    async def get_many(self, model_ids: Iterable[str]) -> dict[tuple[str, str], Calibration]:
        """Every stored calibration of these models, by ``(model_id, profile)``."""
        ids = list(model_ids)
        if not ids:
            return {}
        rows = await self.session.scalars(select(TokenCalibrationRow).where(TokenCalibrationRow.model_id.in_(ids)))
        return {(r.model_id, r.profile): _of(r) for r in rows}

    async def observe(
        self, model_id: str, profile: str, estimated: int, reported: int, *, window: int | None = None
    ) -> Calibration:
        """Fold one call (our uncalibrated count, the provider's count) into the stored factor; ``window`` (the
        model's context window) lets a report at the window be doubted as a truncation."""
        # Make sure the row exists (two instances may record a model's first call at once), then lock it.
        insert = dialect_insert(self.session)(TokenCalibrationRow).values(
            model_id=model_id, profile=profile, factor=1.0, spread=0.0, calls=0, updated_at=utcnow()
        )
        await self.session.execute(insert.on_conflict_do_nothing(index_elements=["model_id", "profile"]))
        statement = (
            select(TokenCalibrationRow)
            .where(TokenCalibrationRow.model_id == model_id, TokenCalibrationRow.profile == profile)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        row = (await self.session.scalars(statement)).one()
        updated = weigh(_of(row), estimated, reported, window=window)
        row.factor, row.calls, row.spread = updated.factor, updated.calls, updated.spread
        row.updated_at = utcnow()
        await self.session.flush()
        return updated
