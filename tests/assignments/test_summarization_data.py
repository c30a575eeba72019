"""helpers.summarization: the generated news corpus, its vocabulary, batches, ROUGE and the
XSum / CNN-DailyMail loader (on small local files: nothing is downloaded)."""

import json
import re

import pytest
import torch

from helpers import summarization as S

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


@pytest.fixture(scope="module")
def corpus():
    return S.make_corpus()


@pytest.fixture(scope="module")
def vocab(corpus):
    return S.build_vocabulary(corpus.train)


def words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z]+", text))


def test_the_corpus_is_a_pure_function_of_its_seed(corpus):
    assert S.make_corpus() == corpus
    assert S.make_corpus(seed=1).train[:50] != corpus.train[:50]
    assert (len(corpus.train), len(corpus.val), len(corpus.test)) == (6000, 400, 600)
    ids = [a.id for split in (corpus.train, corpus.val, corpus.test) for a in split]
    assert len(ids) == len(set(ids))
    assert {a.story for a in corpus.train} == set(S.STORY_TYPES)
    # the training split does not depend on the size asked of the test split
    assert S.make_corpus(n_test=10).train == corpus.train


def test_unseen_test_articles_name_nobody_and_nowhere_from_training(corpus):
    unseen_pool = {w for names in S.ENTITY_POOLS["unseen"].values() for n in names for w in n.split()}
    seen_pool = {w for names in S.ENTITY_POOLS["seen"].values() for n in names for w in n.split()}
    assert not unseen_pool & seen_pool
    training_words = set().union(*(words(a.document + " " + a.summary) for a in corpus.train + corpus.val))
    assert not unseen_pool & training_words
    unseen = [a for a in corpus.test if a.unseen]
    assert len(unseen) == 200
    for article in unseen:
        names = words(article.document) & (unseen_pool | seen_pool)
        assert names and names <= unseen_pool, article
    assert all(words(a.summary) & seen_pool for a in corpus.test if not a.unseen)


def test_every_fact_of_a_summary_is_in_its_article_among_distractors(corpus):
    for article in corpus.train[:2000] + corpus.test:
        for token in re.findall(r"[A-Z][a-z]+|\d[\d,.]*\d|\d", article.summary):
            if token not in {"A"}:
                assert token in article.document, (token, article)
    # distractors: more names and numbers in an article than its summary needs
    extra = [len(words(a.document) - words(a.summary)) for a in corpus.train[:500]]
    assert min(extra) >= 5


def test_the_lead_baseline_is_a_real_baseline_not_the_answer(corpus):
    refs = [a.summary for a in corpus.test]
    lead = S.rouge([S.lead_summary(a.document) for a in corpus.test], refs)
    assert 0.2 < lead["rougeL"] < 0.5, lead
    assert sum(S.lead_summary(a.document) == a.summary for a in corpus.test) == 0
    assert S.lead_summary("One. Two three! Four?", sentences=2) == "One. Two three!"


def test_the_vocabulary_round_trips_every_text_and_knows_no_unknown_piece(corpus, vocab):
    assert (vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id) == (0, 1, 2, 3)
    assert 500 < len(vocab) < 2000  # a small softmax: the corpus's pieces, not MiniLM's 30,522
    for article in corpus.train[:300] + corpus.test:
        assert vocab.decode(vocab.encode(article.summary)) == article.summary.lower()
        assert vocab.decode(vocab.encode(article.document)) == article.document.lower()
        assert vocab.unk_id not in vocab.encode(article.document)
    ids = vocab.encode("Anna Novak won.", bos=True, eos=True)
    assert ids[0] == vocab.bos_id and ids[-1] == vocab.eos_id
    assert vocab.decode(ids + [7, 8]) == "anna novak won."  # stops at eos
    assert vocab.decode(torch.tensor([vocab.pad_id, *ids[1:]])) == "anna novak won."
    # unseen names fall back to pieces the vocabulary has, down to single letters
    assert vocab.decode(vocab.encode("Wilhelmina Zielinski")) == "wilhelmina zielinski"


def test_batches_are_padded_batch_first_with_bos_and_eos(corpus, vocab):
    batch = next(S.batches(corpus.train, vocab, 8))
    assert batch.src.dtype == torch.long and batch.src.shape[0] == 8
    assert batch.tgt_in.shape == batch.targets.shape == (8, batch.tgt.shape[1] - 1)
    assert (batch.tgt[:, 0] == vocab.bos_id).all()
    for row, article in zip(batch.tgt, batch.articles):
        n = len(vocab.encode(article.summary))
        assert row[n + 1] == vocab.eos_id and (row[n + 2:] == vocab.pad_id).all()
    assert (batch.src == vocab.pad_id).any()  # rows differ in length
    everything = list(S.batches(corpus.val, vocab, 64, shuffle=True, seed=3))
    assert sorted(a.id for b in everything for a in b.articles) == sorted(a.id for a in corpus.val)
    assert [a.id for a in everything[0].articles] != [a.id for a in corpus.val[:64]]
    short = next(S.batches(corpus.train, vocab, 4, max_src=10, max_tgt=5))
    assert short.src.shape[1] == 10 and short.tgt.shape[1] == 6
    with pytest.raises(ValueError, match="batch_size"):
        next(S.batches(corpus.train, vocab, 0))


def test_rouge_scores_pairs_and_refuses_mismatched_lists():
    perfect = S.rouge(["Anna Novak won the race."], ["Anna Novak won the race."])
    assert perfect == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    half = S.rouge(["anna novak"], ["anna novak won the race"])
    assert 0 < half["rougeL"] < 1 and half["rouge2"] < half["rouge1"]
    with pytest.raises(ValueError, match="as many"):
        S.rouge(["a"], ["a", "b"])


def test_the_news_loader_reads_xsum_and_cnn_dailymail_files_offline(tmp_path):
    xsum = tmp_path / "xsum.jsonl"
    rows = [{"id": "38264402", "document": "A fire broke out in a Cardiff school on Monday.",
             "summary": "Fire at a Cardiff school."},
            {"id": "38264403", "document": "The council approved the new bridge.", "summary": "Bridge approved."}]
    xsum.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    articles = S.load_news_dataset("xsum", "test", data_files=xsum)
    assert [(a.id, a.document, a.summary, a.story) for a in articles] == [
        (r["id"], r["document"], r["summary"], "xsum") for r in rows]
    assert len(S.load_news_dataset("xsum", data_files=xsum, limit=1)) == 1

    cnn = tmp_path / "cnn.csv"
    cnn.write_text('id,article,highlights\nabc,"Markets rose, again, on Friday.",Markets rose.\n')
    (article,) = S.load_news_dataset("cnn_dailymail", "validation", data_files=cnn)
    assert (article.document, article.summary) == ("Markets rose, again, on Friday.", "Markets rose.")

    with pytest.raises(ValueError, match="highlights"):
        S.load_news_dataset("cnn_dailymail", data_files=xsum)  # xsum's field names
    with pytest.raises(FileNotFoundError, match="no such data file"):
        S.load_news_dataset("xsum", data_files=tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="unknown dataset"):
        S.load_news_dataset("gigaword")


def test_facts_of_a_summary_are_its_names_and_numbers_as_pieces():
    names, numbers = S.facts_of("A landslide in Lisbon forced 14,505 people from their homes on Tuesday.")
    assert names == {"lisbon"} and numbers == {"14", "505"}  # no article, no weekday; digits as the vocabulary splits them
    names, _ = S.facts_of("Tidewell Industries named Irene Meyer chief executive, from July.")
    assert names == {"tidewell", "industries", "irene", "meyer"}


def test_copied_facts_reads_where_each_copied_name_and_number_looks(corpus, vocab):
    """Question 12's list under the map: a row that peaks on the same piece in the article, one
    that spreads its weight elsewhere, and pieces that are no fact of the summary are left out."""
    article_pieces = ["a", "flood", "in", "lisbon", "forced", "14", ",", "505", "people", "."]
    summary_pieces = ["a", "flood", "in", "lisbon", "forced", "14", ",", "505", "people", ".", "[EOS]"]
    weights = torch.full((len(summary_pieces), len(article_pieces)), 0.01)
    weights[3, 3] = 0.9  # "lisbon" reads its place
    weights[5, 1] = 0.6  # "14" looks at "flood" most, a little at its place
    weights[5, 5] = 0.3
    weights[7, 7] = 0.5  # "505" reads its place
    rows = S.copied_facts(weights, summary_pieces, article_pieces, "A flood in Lisbon forced 14,505 people from home.")
    assert [r["piece"] for r in rows] == ["lisbon", "14", "505"]
    assert [r["peak_on_its_place"] for r in rows] == [True, False, True]
    assert [r["number"] for r in rows] == [False, True, True]
    assert abs(rows[1]["weight_on_its_place"] - 0.3) < 1e-6
    with pytest.raises(ValueError, match="one row per summary piece"):
        S.copied_facts(weights[:3], summary_pieces, article_pieces, "A flood in Lisbon.")  # rows and pieces disagree
