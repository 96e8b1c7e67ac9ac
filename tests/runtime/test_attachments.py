"""Attachments are content-addressed, stored once through the storage API, and re-hashed on read.

DESIGN.md section 3: large observations are sha256-addressed attachments; a checkpoint references
them by digest and never copies them.
"""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from runtime.core.canonical import digest_bytes
from runtime.errors import AttachmentError
from runtime.evidence.attachments import attachment_get, attachment_put, storage_name
from runtime.models import Attachment

pytestmark = pytest.mark.django_db

SCREENSHOT = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def test_it_stores_bytes_under_their_sha256(media):
    digest = attachment_put(data=SCREENSHOT, content_type="image/png")

    assert digest == digest_bytes(SCREENSHOT)
    hex_ = digest.removeprefix("sha256:")
    assert (media / "attachments" / hex_[:2] / hex_[2:4] / hex_).read_bytes() == SCREENSHOT
    row = Attachment.objects.get(digest=digest)
    assert (row.size, row.content_type) == (len(SCREENSHOT), "image/png")
    assert attachment_get(digest=digest) == SCREENSHOT


def test_it_stores_the_same_content_only_once(media):
    first = attachment_put(data=SCREENSHOT)
    second = attachment_put(data=bytearray(SCREENSHOT))

    assert first == second
    assert Attachment.objects.count() == 1
    assert len([p for p in media.rglob("*") if p.is_file()]) == 1


def test_it_detects_bytes_changed_in_storage(media):
    digest = attachment_put(data=SCREENSHOT)
    (media / storage_name(digest)).write_bytes(SCREENSHOT[:-1] + b"\x00")

    with pytest.raises(AttachmentError, match="does not match"):
        attachment_get(digest=digest)


def test_it_reports_missing_bytes_and_unknown_digests(media):
    digest = attachment_put(data=SCREENSHOT)
    (media / storage_name(digest)).unlink()

    with pytest.raises(AttachmentError, match="missing"):
        attachment_get(digest=digest)
    with pytest.raises(AttachmentError, match="no attachment"):
        attachment_get(digest=digest_bytes(b"never stored"))
    with pytest.raises(AttachmentError):
        attachment_get(digest="md5:abc")


def test_it_replaces_a_torn_write_left_by_a_crashed_put(media):
    digest = digest_bytes(SCREENSHOT)
    default_storage.save(
        storage_name(digest), ContentFile(SCREENSHOT[:100])
    )  # crash mid-write, no row

    assert attachment_put(data=SCREENSHOT) == digest
    assert attachment_get(digest=digest) == SCREENSHOT


def test_it_refuses_text_instead_of_bytes():
    with pytest.raises(TypeError):
        attachment_put(data="not bytes")  # type: ignore[arg-type]
