"""The client lives in fleet_rl.env.client; the old name fleet_rl.client still imports the same objects."""

from __future__ import annotations

import fleet_rl.client as old
import fleet_rl.env.client as new


def test_the_old_import_path_gives_the_same_client_classes():
    assert set(old.__all__) == set(new.__all__)
    for name in new.__all__:
        assert getattr(old, name) is getattr(new, name)
