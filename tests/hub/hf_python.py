"""huggingface_hub (PyPI) as the oracle for the cache layout hf::download shares with Python users.

  hf_python.py download HF_HOME ENDPOINT REPO REVISION FILE...   hf_hub_download each file, print the paths
  hf_python.py lookup HF_HOME REPO REVISION FILE...              offline: each cached path (or MISSING), then
                                                                 the cache scan's file count and warnings
"""
import os
import sys


def main():
    action, home = sys.argv[1], sys.argv[2]
    os.environ["HF_HOME"] = home  # read by huggingface_hub at import
    os.environ.pop("HF_HUB_CACHE", None)
    os.environ.pop("HF_TOKEN", None)
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if action == "download":
        os.environ["HF_ENDPOINT"] = sys.argv[3]
        os.environ["HF_HUB_OFFLINE"] = "0"
        from huggingface_hub import hf_hub_download
        repo, revision = sys.argv[4], sys.argv[5]
        for f in sys.argv[6:]:
            print(hf_hub_download(repo, f, revision=revision))
    elif action == "lookup":
        os.environ["HF_HUB_OFFLINE"] = "1"
        from huggingface_hub import scan_cache_dir, try_to_load_from_cache
        repo, revision = sys.argv[3], sys.argv[4]
        for f in sys.argv[5:]:
            p = try_to_load_from_cache(repo, f, revision=revision)
            print(p if isinstance(p, str) else "MISSING")
        info = scan_cache_dir()
        print(sum(r.nb_files for r in info.repos), len(info.warnings))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
