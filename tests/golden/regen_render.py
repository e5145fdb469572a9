"""Regenerate tests/golden/render_golden.json (and the PNGs beside it) from the current renderer.

    .venv/bin/python tests/golden/regen_render.py

Run it after an intentional change of a look (and a bump of that style's version in speco3.render.STYLES),
or after an upgrade of matplotlib/Pillow/FreeType once you have looked at the new images. Images of style
versions that are no longer in STYLES are dropped.
"""
import io, json, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1])]
from test_render import GOLDEN_JSON, digest, golden_images, rendering_stack  # noqa: E402


def main():
    images = {}
    for png in HERE.glob("render_*.png"): png.unlink()
    for (version, case), im in golden_images().items():
        images.setdefault(version, {})[case] = {"size": list(im.size), "sha256": digest(im)}
        buf = io.BytesIO(); im.save(buf, format="PNG", optimize=True)
        if buf.tell() < 50_000:    # small enough to keep for humans
            (HERE / f"render_{version.replace('/', '-')}_{case}.png").write_bytes(buf.getvalue())
    GOLDEN_JSON.write_text(json.dumps({"stack": rendering_stack(), "images": images}, indent=1) + "\n")
    print(f"wrote {GOLDEN_JSON} ({sum(len(v) for v in images.values())} images) for {rendering_stack()}")


if __name__ == "__main__":
    main()
