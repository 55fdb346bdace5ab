"""Screenshots of the built documentation in headless Chromium.

    python -m sphinx -W -b html doc doc/_build/html
    python doc/screenshots.py [--build doc/_build/html] [--out doc/_screenshots]

Opens the built index, the "choosing an estimator" page (its decision
table), the gallery's cards, user-guide pages with equations (PSA, SBM), a
gallery page and the results page through ``file://`` URLs (no server, no
network: MathJax is served from the site itself) and writes one PNG per
page. Needs a Chromium binary (``chromium``, ``chromium-browser`` or
``google-chrome`` on the PATH; on Debian ``apt-get install chromium``).
"""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

# page -> (path in the build, window height: the gallery page down to its figure)
PAGES = {
    "index": ("index.html", 1600),
    "choosing": ("choosing.html", 4000),
    "gallery": ("auto_examples/index.html", 2000),
    "user_guide_psa": ("user_guide/psa.html", 1600),
    "user_guide_sbm": ("user_guide/sbm.html", 1600),
    "gallery_single_pass": ("auto_examples/plot_single_pass_curves.html", 4200),
    "results_plots": ("results.html", 3000),
}
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    sys.exit("no Chromium found: install it (e.g. apt-get install chromium)")


def shoot(browser, url, png, width, height):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--allow-file-access-from-files", f"--window-size={width},{height}",
           # MathJax typesets after load: give the page time before the capture
           "--virtual-time-budget=10000", f"--screenshot={png}", url]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parent
    parser.add_argument("--build", type=Path, default=root / "_build" / "html")
    parser.add_argument("--out", type=Path, default=root / "_screenshots")
    parser.add_argument("--width", type=int, default=1280)
    args = parser.parse_args(argv)
    browser = find_browser()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (page, height) in PAGES.items():
        html = (args.build / page).resolve()
        if not html.exists():
            sys.exit(f"{html} is missing: build the documentation first")
        png = args.out / f"{name}.png"
        shoot(browser, html.as_uri(), png, args.width, height)
        print(png)


if __name__ == "__main__":
    main()
