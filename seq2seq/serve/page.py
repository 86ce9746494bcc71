"""The page at `/`: the project's attention viewer with a text box that asks the service.

It is the viewer of `seq2seq-translate --html` (`seq2seq.visualise.viewer`): its markup,
style and script, inline, nothing fetched from a network. Two things are added: a form
above the viewer, and a script that posts the typed lines to `translate` with
`attention: true`, puts the answer into the page's data element (the viewer's JSON: the
model's pair, description and marked heads from the start, the sentences from the answer)
and runs the viewer's own script again, wrapped in a function, on each answer. The
viewer's sentence selector is replaced by an empty one first, since the viewer fills it
only once.

The page's own status line says the limits: lines and characters per request, and the
model's piece limit (it reads the first N pieces of a line). Under each translation, the
warnings of the answer are shown in words (`warnings`: a line cut to the model's limit, a
line hardly in the script of the model's source language), each in an element of class
`input-note`.
"""

from __future__ import annotations

import html
import re
from typing import Any

from seq2seq.config.search_settings import SearchSettings
from seq2seq.serve.limits import Limits
from seq2seq.visualise.viewer import PAGE, PAGE_SCRIPT, PAGE_STYLE, embedded_json

FORM = """
<form id="translate-form">
  <textarea id="source" rows="3" cols="60" lang="zh"
            placeholder="Type a sentence (one a line), e.g. 我爱中国。"></textarea>
  <div class="options">
    <label>beam <input id="beam" type="number" min="1" max="@@MAX_BEAM@@" value="@@BEAM@@"></label>
    <button type="submit" id="translate">Translate</button>
  </div>
</form>
<p id="status" aria-live="polite">At most @@MAX_SENTENCES@@ lines of @@MAX_CHARS@@ characters; the model reads the first @@MAX_PIECES@@ pieces (words or parts of words) of each line.</p>
<ol id="translations"></ol>
"""

FORM_STYLE = """
#translate-form { display: flex; flex-wrap: wrap; gap: .6em; align-items: flex-end; margin: .8em 0; }
#source { font: inherit; width: min(40em, 95vw); padding: .3em; }
#beam { width: 4em; font: inherit; }
#status { color: #555; margin: .2em 0; }
#translations { margin: .2em 0 .8em; padding-left: 1.6em; font-size: 1.1em; }
#translations .input-note { color: #8a4b00; font-size: .85em; margin: .1em 0 .3em; }
body.waiting #controls, body.waiting #texts, body.waiting #note, body.waiting #marks,
body.waiting #readout, body.waiting #strips, body.waiting #scale, body.waiting #heatmap { display: none; }
"""

SERVE_SCRIPT = r"""
"use strict";
function showViewer() {
@@VIEWER@@
}

(() => {
  const byId = (id) => document.getElementById(id);
  const base = JSON.parse(byId("attention-data").textContent);
  const status = byId("status");
  document.body.classList.add("waiting");
  byId("title").textContent = base.title;
  byId("meta").textContent = base.pair + " · " + base.model;

  function listTranslations(translations) {
    const list = byId("translations");
    list.replaceChildren();
    for (const translation of translations) {
      const item = document.createElement("li");
      item.textContent = translation.text;
      for (const warning of translation.warnings) {
        const note = document.createElement("div");
        note.className = "input-note";
        note.textContent = "⚠ " + warning;
        item.append(note);
      }
      list.append(item);
    }
  }

  function show(answer) {
    listTranslations(answer.translations);
    const noted = answer.translations.filter((translation) => translation.warnings.length > 0);
    status.textContent = "Translated with " + answer.engine + ", beam " + answer.beam_size + "."
      + (noted.length === 0 ? "" : " " + noted.length + " of " + answer.translations.length
         + " lines have a warning below their translation.");
    const sentences = answer.translations
      .filter((translation) => translation.attention && translation.attention.length > 0)
      .map((translation) => ({ source: translation.source, output: translation.text,
                               reference: null, views: translation.attention }));
    if (sentences.length === 0) return;
    const select = byId("sentence");
    select.replaceWith(select.cloneNode(false));
    byId("attention-data").textContent = JSON.stringify(Object.assign({}, base, { sentences }));
    document.body.classList.remove("waiting");
    showViewer();
  }

  async function translate(event) {
    event.preventDefault();
    const sentences = byId("source").value.split("\n").map((line) => line.trim())
      .filter((line) => line.length > 0);
    if (sentences.length === 0) { status.textContent = "Type a sentence first."; return; }
    const request = { sentences, beam_size: Number(byId("beam").value),
                      attention: base.alignment !== null };
    byId("translate").disabled = true;
    status.textContent = "Translating…";
    try {
      const response = await fetch("translate", { method: "POST",
        headers: { "Content-Type": "application/json" }, body: JSON.stringify(request) });
      const answer = await response.json();
      if (response.ok) show(answer);
      else status.textContent = "Error " + response.status + ": " + answer.error;
    } catch (error) {
      status.textContent = "The service did not answer: " + error;
    } finally {
      byId("translate").disabled = false;
    }
  }

  byId("translate-form").addEventListener("submit", translate);
})();
"""


def page_html(
    base: dict[str, Any], limits: Limits, defaults: SearchSettings, max_source_pieces: int
) -> str:
    """The page: the viewer's markup with the form after its header, `base` (the viewer's
    data without sentences) as its data, the viewer's style and script inline; its status
    line gives the limits and the model's `max_source_pieces`."""
    if PAGE.count("</header>") != 1:
        raise RuntimeError("the viewer's page has changed: no single </header> to follow")
    numbers = {"MAX_BEAM": limits.max_beam, "BEAM": defaults.beam_size,
               "MAX_SENTENCES": limits.max_sentences, "MAX_CHARS": limits.max_chars,
               "MAX_PIECES": max_source_pieces}  # fmt: skip
    form = re.sub(r"@@(\w+)@@", lambda match: str(int(numbers[match.group(1)])), FORM)
    parts = {
        "TITLE": html.escape(base["title"]),
        "STYLE": PAGE_STYLE + FORM_STYLE,
        "DATA": embedded_json(base),
        "SCRIPT": SERVE_SCRIPT.replace("@@VIEWER@@", PAGE_SCRIPT),
    }  # one pass, so text from the data is never searched for placeholders
    template = PAGE.replace("</header>", "</header>\n" + form)
    return re.sub(r"@@(TITLE|STYLE|DATA|SCRIPT)@@", lambda match: parts[match.group(1)], template)
