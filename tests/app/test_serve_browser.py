"""The search page of `qtsearch serve` in a real headless browser (Debian's chromium through
selenium and chromedriver): type a query, see its results, open a hit's passage with the
keyboard, switch the mode, run an analogy, and check screenshots of what rendered, at a desktop
width and at a phone's."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest
from serve_fixtures import serving

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian's chromium and chromium-driver "
                                       "(apt-get install chromium chromium-driver)")
QUERY = "She was very happy to see him again."


@pytest.fixture(scope="module")
def site(flat: Path):
    with serving(flat) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 "--window-size=1200,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options,
                              service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait(driver, condition, seconds: float = 60):
    return WebDriverWait(driver, seconds).until(condition)


def inked(png: bytes) -> float:
    """Share of pixels far from the image's most common colour (the background): text,
    borders, highlights. A blank or empty render is ~0."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.int16)
    background = np.bincount(pixels.ravel()).argmax()
    return float((np.abs(pixels - background) > 60).mean())


def hits_shown(driver) -> list:
    return driver.find_elements(By.CSS_SELECTOR, "#hits li.hit")


def test_search_context_mode_and_analogy(browser, site, tmp_path):
    browser.get(site + "/")
    wait(browser, ec.text_to_be_present_in_element((By.ID, "summary"), "2,000 sentences"))
    box = browser.switch_to.active_element  # autofocus: typing starts at once
    assert box.get_attribute("id") == "q"
    box.send_keys(QUERY, Keys.ENTER)
    wait(browser, lambda d: len(hits_shown(d)) == 10)
    want = httpx.get(f"{site}/search", params={"q": QUERY, "k": 10}).json()[0]["hits"]
    hits = hits_shown(browser)
    assert [int(h.get_attribute("data-id")) for h in hits] == [w["id"] for w in want]
    first = hits[0].find_element(By.CSS_SELECTOR, ".hit-main")
    assert want[0]["text"] in first.text and f"{want[0]['score']:.3f}" in first.text
    assert "austen.txt:" in hits[0].find_element(By.CSS_SELECTOR, ".source").text

    # the keyboard opens a hit's passage: focus the hit, press Enter
    first.send_keys(Keys.ENTER)
    current = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#hits .context .current"))
    assert current[0].text == want[0]["text"] and first.get_attribute("aria-expanded") == "true"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#hits .context li")) >= 2
    shot = browser.find_element(By.ID, "results").screenshot_as_png
    (tmp_path / "results.png").write_bytes(shot)
    assert Image.open(io.BytesIO(shot)).size[1] > 300 and inked(shot) > 0.01
    page = browser.get_screenshot_as_png()
    (tmp_path / "page.png").write_bytes(page)
    assert inked(page) > 0.01

    # "/" brings the focus back to the search box; lexical mode answers by the words
    browser.find_element(By.TAG_NAME, "body").send_keys("/")
    assert browser.switch_to.active_element.get_attribute("id") == "q"
    browser.find_element(By.CSS_SELECTOR, "input[name=mode][value=lexical]").click()
    browser.find_element(By.ID, "q").send_keys(Keys.ENTER)
    wait(browser, ec.text_to_be_present_in_element((By.ID, "results-title"), "lexical:"))
    legs = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#hits .legs"))
    assert legs and all(leg.text.startswith("lexical ") for leg in legs)

    # an analogy: A is to B as C is to ?
    browser.find_element(By.CSS_SELECTOR, "#analogy-box summary").click()
    for field, text in zip("abc", ("She was happy.", "She was sad.", "He was happy.")):
        browser.find_element(By.ID, field).send_keys(text)
    browser.find_element(By.ID, "c").send_keys(Keys.ENTER)
    wait(browser, ec.text_to_be_present_in_element(
        (By.ID, "results-title"), "She was happy. : She was sad. :: He was happy. : ?"))
    want = httpx.post(f"{site}/analogy", json={"a": "She was happy.", "b": "She was sad.",
                                              "c": "He was happy.", "k": 10}).json()
    wait(browser, lambda d: [int(h.get_attribute("data-id")) for h in hits_shown(d)]
         == [h["id"] for h in want[0]["hits"]])
    assert not browser.find_element(By.ID, "error").is_displayed()


def test_a_bad_query_shows_its_error(browser, site):
    browser.get(site + "/")
    wait(browser, ec.text_to_be_present_in_element((By.ID, "summary"), "sentences"))
    browser.find_element(By.CSS_SELECTOR, "input[name=mode][value=semantic]").click()
    browser.find_element(By.ID, "q").send_keys("zzqx qqzx", Keys.ENTER)
    error = wait(browser, ec.visibility_of_element_located((By.ID, "error")))
    assert "none of its words is in the model's vocabulary" in error.text
    assert hits_shown(browser) == []


def test_readable_at_a_phone_width(browser, site, tmp_path):
    browser.set_window_size(390, 844)
    try:
        browser.get(site + "/")
        wait(browser, ec.text_to_be_present_in_element((By.ID, "summary"), "sentences"))
        browser.find_element(By.ID, "q").send_keys(QUERY, Keys.ENTER)
        wait(browser, lambda d: len(hits_shown(d)) == 10)
        width = browser.execute_script("return window.innerWidth")
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
        for hit in hits_shown(browser):  # every hit inside the screen, none cut off
            rect = hit.rect
            assert rect["x"] >= 0 and rect["x"] + rect["width"] <= width
        shot = browser.get_screenshot_as_png()
        (tmp_path / "phone.png").write_bytes(shot)
        assert inked(shot) > 0.01
    finally:
        browser.set_window_size(1200, 900)
