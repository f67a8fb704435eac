"""The access-control benchmark runs end to end at a tiny size, and its warm caches hold."""

from __future__ import annotations

from pathlib import Path

from loadtest.scenarios import authbench


async def test_the_auth_benchmark_measures_every_mode_with_warm_caches(tmp_path: Path) -> None:
    (tmp_path / "authbench-tokens.csv").write_text(
        "".join(f"{u}-token,{u},{i}\n" for i, u in enumerate(authbench.USERS))
    )
    report = await authbench.run(20, 48, tmp_path, "cmd")
    rows = [line for line in report.splitlines() if line.startswith("| ") and "ms |" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["none", "token", "delegated"]
    delegated = [c.strip() for c in rows[2].split("|")]
    assert delegated[7] == "100.0% (48/48)"  # token cache
    assert delegated[8] == "100.0% (48/48)"  # access cache
    assert delegated[9] == "0"  # no review upstream once warm
