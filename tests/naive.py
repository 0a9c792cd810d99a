"""A naive reference of the distillation, written for clarity, independent of the package.

Each sentence runs through the full model alone (batch size 1) with the tokenizer's own API; an
occurrence's subwords are found by scanning token offsets by hand.
"""

from __future__ import annotations

import numpy as np
import spacy
import torch
from transformers import AutoModel, AutoTokenizer


def find_occurrences(lines, entries, case="lower"):
    """(sentence_text, start_char, end_char) per entry, in corpus order."""
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    norm = (lambda s: s.lower()) if case == "lower" else (lambda s: s)
    found = {entry: [] for entry in entries}
    for line in lines:
        for sent in nlp(line).sents:
            words = [t for t in sent]
            for entry in entries:
                parts = [norm(p) for p in entry.split(" ")]
                for i in range(len(words) - len(parts) + 1):
                    if [norm(w.text) for w in words[i : i + len(parts)]] == parts:
                        first, last = words[i], words[i + len(parts) - 1]
                        start = first.idx - sent.start_char
                        end = last.idx + len(last.text) - sent.start_char
                        found[entry].append((sent.text, start, end))
    return found


def subword_positions(offsets, start, end):
    """Token positions overlapping [start, end); a zero-width token joins the token after it."""
    inside = [s < end and e > start and e > s for s, e in offsets]
    for i in range(len(offsets) - 2, -1, -1):
        s, e = offsets[i]
        if s == e and inside[i + 1]:
            inside[i] = True
    return [i for i, flag in enumerate(inside) if flag]


def naive_distill(model_dir, lines, entries, layers, pool, combine, max_contexts=0, case="lower"):
    is_roberta = "roberta" in AutoModel.from_pretrained(model_dir).config.model_type
    lead = " " if is_roberta else ""  # RoBERTa sees every word with its leading space
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    limit = tokenizer.model_max_length
    result = {}
    for entry, contexts in find_occurrences(lines, entries, case).items():
        if max_contexts:
            contexts = contexts[:max_contexts]
        vectors = []
        for text, start, end in contexts:
            encoding = tokenizer(lead + text, add_special_tokens=False, return_offsets_mapping=True)
            ids = encoding["input_ids"]
            offsets = [(s - len(lead), e - len(lead)) for s, e in encoding["offset_mapping"]]
            positions = subword_positions(offsets, start, end)
            window = limit - 2
            begin = 0
            if len(ids) > window:
                # Windows overlap by half; take the one where the occurrence is most central.
                stride = window // 2
                starts = list(range(0, len(ids) - window, stride)) + [len(ids) - window]
                margins = [min(positions[0] - s, s + window - 1 - positions[-1]) for s in starts]
                begin = starts[int(np.argmax(margins))]
                assert max(margins) >= 0
            chunk = ids[begin : begin + window]
            input_ids = [tokenizer.cls_token_id] + chunk + [tokenizer.sep_token_id]
            with torch.no_grad():
                states = model(torch.tensor([input_ids]), output_hidden_states=True).hidden_states
            rows = [p - begin + 1 for p in positions]
            per_layer = []
            for layer in layers:
                tokens = states[layer][0, rows].numpy()
                per_layer.append(
                    {
                        "mean": tokens.mean(0),
                        "max": tokens.max(0),
                        "first": tokens[0],
                        "last": tokens[-1],
                    }[pool]
                )
            stacked = np.stack(per_layer)
            vectors.append(
                {"mean": stacked.mean(0), "sum": stacked.sum(0), "concat": stacked.reshape(-1)}[
                    combine
                ]
            )
        if vectors:
            result[entry.lower() if case == "lower" else entry] = (
                np.mean(vectors, axis=0),
                len(vectors),
            )
    return result
