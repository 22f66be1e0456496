"""The weights channel against a real redis-server: versions grow, actors see each change once."""

from __future__ import annotations

import pytest

from checkerzero.store.weights import KEEP_VERSIONS, WeightsChannel


def test_publish_and_follow_latest(client):
    learner = WeightsChannel(client)
    actor = WeightsChannel(client)
    assert actor.poll() is None
    learner.publish(b"v1", 1)
    got = actor.poll()
    assert got is not None and (got.version, got.data) == (1, b"v1")
    assert actor.poll() is None  # unchanged: nothing travels
    learner.publish(b"v2", 2)
    assert actor.poll().data == b"v2"


def test_versions_must_increase(client):
    ch = WeightsChannel(client)
    ch.publish(b"a", 3)
    with pytest.raises(ValueError, match="not above the latest 3"):
        ch.publish(b"b", 3)


def test_gated_actors_follow_the_promoted_version(client):
    learner = WeightsChannel(client)
    actor = WeightsChannel(client, follow="best")
    learner.publish(b"v1", 1)
    learner.publish(b"v2", 2)
    assert actor.poll() is None  # nothing promoted yet
    learner.promote(1)
    assert actor.poll().data == b"v1"
    for v in range(3, 3 + KEEP_VERSIONS + 2):
        learner.publish(b"x", v)
    assert learner.get(1) is None  # aged out of the window...
    actor2 = WeightsChannel(client, follow="best")
    assert actor2.poll().data == b"v1"  # ...but the promoted bytes are kept
    with pytest.raises(ValueError, match="cannot promote"):
        learner.promote(1)


def test_unknown_follow_mode(client):
    with pytest.raises(ValueError, match="follows"):
        WeightsChannel(client, follow="newest")
