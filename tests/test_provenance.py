"""What a results file says of its Nsight Compute (``provenance.ncu_version``), without a GPU."""

from __future__ import annotations

import stat

from convkit.study import provenance


def _ncu(folder, output: str):
    folder.mkdir(exist_ok=True)
    ncu = folder / "ncu"
    ncu.write_text(f"#!/bin/sh\nprintf '{output}'\n")
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    return ncu


def test_every_run_names_the_ncu_on_its_path_or_says_there_is_none(tmp_path, monkeypatch):
    """``ncu --version``'s last line (the book's provenance tables read the version from it); "not installed" where no
    ncu is on the PATH; "unknown" where it says nothing. Each run's provenance has it (``collect``'s ``profiler``),
    not only the profiles'."""
    ncu = _ncu(tmp_path / "bin", "NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1)\\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert provenance.ncu_version() == "Version 2025.3.1.0 (build 1)" == provenance.ncu_version(str(ncu))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert provenance.ncu_version() == "not installed"
    assert provenance.ncu_version(str(_ncu(tmp_path / "quiet", ""))) == "unknown"
    from types import SimpleNamespace as NS

    from convkit.core import gpu

    cuda = NS(nvrtc=NS(getVersion=lambda: (13, 0)),
              runtime=NS(driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 13020))  # fmt: skip
    monkeypatch.setattr(gpu, "require_cupy", lambda: NS(cuda=cuda, __version__="14.2.0"))
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(gpu, "device_name", lambda: "NVIDIA H200")
    from convkit.libs import cudnn, cvcuda, pytorch

    for library in (cudnn, cvcuda, pytorch):  # (the libraries as they are here, or as another test stood them in)
        monkeypatch.setattr(library, "version", lambda: None)
    monkeypatch.setattr(cudnn, "library_origin", lambda: "not found")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{__import__('os').environ['PATH']}")
    assert provenance.collect()["profiler"] == "Version 2025.3.1.0 (build 1)"
