"""Alert fingerprint claims: deduplication and resolution of native alerts."""

from __future__ import annotations

from datetime import datetime

from google.api_core import exceptions as gexc
from google.cloud import firestore

from tarsy.models import (
    AlertFingerprint,
    Session,
)
from tarsy.persistence._firestore import (
    ALERT_FINGERPRINTS,
    FirestoreBase,
    document_of,
)


class AlertRecords(FirestoreBase):
    """The fingerprint claims of alerts."""

    async def create_alert_session(
        self,
        session: Session,
        dedup_key: str,
        fingerprint: AlertFingerprint,
        *,
        replacing: datetime | None = None,
    ) -> bool:
        """Create a session and the fingerprint claim that names it, in one batch.

        The claim is ``create()``d, so of concurrent deliveries of one alert
        occurrence exactly one batch commits; the others write nothing. An
        expired claim is replaced instead, under a ``last_update_time``
        precondition (``replacing``, the update time it was read with): of
        concurrent replacements, again only one commits. No transaction, no lock.

        Args:
            session: The new session.
            dedup_key: The claim's document id (``NormalizedAlert.dedup_key``).
            fingerprint: The claim.
            replacing: The update time of the expired claim to replace; None to create.

        Returns:
            True if this call created the session; False if the claim was taken
            (or changed, or vanished) since the caller looked.
        """
        batch = self._db.batch()
        self._write(batch, self._session(session.session_id), document_of(session), create=True)
        ref = self._alert_fingerprint(dedup_key)
        if replacing is None:
            batch.create(ref, document_of(fingerprint))
        else:
            option = self._db.write_option(last_update_time=replacing)
            batch.update(ref, document_of(fingerprint), option=option)
        self.round_trips.add("commit")
        try:
            await batch.commit()
        except (gexc.AlreadyExists, gexc.FailedPrecondition, gexc.NotFound):
            return False
        return True

    async def get_alert_fingerprint(
        self, dedup_key: str
    ) -> tuple[AlertFingerprint, datetime] | None:
        """Return a fingerprint claim and its update time (to replace it), or None."""
        self.round_trips.add("get")
        snap = await self._alert_fingerprint(dedup_key).get()
        if not snap.exists:
            return None
        return AlertFingerprint.model_validate(snap.to_dict()), snap.update_time

    async def alert_fingerprints_for(
        self, resolve_key: str, limit: int = 50
    ) -> list[AlertFingerprint]:
        """The claims of one alert across its firings (``resolve_key``), newest first.

        An equality filter on one field: Firestore's single-field index serves it.
        """
        self.round_trips.add("query")
        query = (
            self._db.collection(ALERT_FINGERPRINTS)
            .where(filter=firestore.FieldFilter("resolve_key", "==", resolve_key))
            .limit(limit)
        )
        claims = [AlertFingerprint.model_validate(s.to_dict()) async for s in query.stream()]
        return sorted(claims, key=lambda c: c.created_at, reverse=True)

    async def record_alert_resolution(self, session_id: str, resolved_at: datetime) -> bool:
        """Set a session's ``resolved_at``; False if the session does not exist.

        One field is written, so it never conflicts with the steps' own writes.
        """
        self.round_trips.add("update")
        try:
            await self._session(session_id).update({"resolved_at": resolved_at})
        except gexc.NotFound:
            return False
        return True

    async def delete_alert_session(self, session_id: str, dedup_key: str) -> None:
        """Delete a session nothing refers to yet, its chunks and its claim, in one batch.

        For a session whose start could not be published: the sender's retry
        then finds no claim and creates the session again.
        """
        batch = self._db.batch()
        await self._delete_with_chunks(batch, self._session(session_id))
        batch.delete(self._alert_fingerprint(dedup_key))
        self.round_trips.add("commit")
        await batch.commit()
