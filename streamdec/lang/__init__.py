"""Words for the search: lexicons, lang directories and word language models.

=================  ==========================================================================
module             what
=================  ==========================================================================
lexicon.py         lexicon files, word lists spelled with the model's units
lang_dir.py        reading a lang directory for the search (lexicon/words.txt + G.arpa)
compiled.py        a lang directory compiled once into arrays, cached, read back fast
prepare.py         writing a lang directory as icefall's prepare_lang does (disambiguation)
lexicon_fst.py     L / L_disambig as OpenFst (kaldifst), k2 dict (torch) and k2 text
kneser_ney.py      modified Kneser-Ney n-gram estimation and pruning (ARPA out)
ngram.py           the back-off n-gram the search queries (ARPA in)
=================  ==========================================================================

The search side (the lexicon tree joined with a word LM, grammars, neural LM fusion) is in
``streamdec.search`` (``word_graph``, ``grammar``, ``neural_lm``). Nothing here needs
kaldifst, kaldilm or torch at import time; writing FSTs and ``.pt`` files does.
"""
