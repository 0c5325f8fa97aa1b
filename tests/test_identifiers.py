"""A paper's arXiv ID or DOI, the key that matches the same work across sources."""

import pytest

from recommender.corpus.identifiers import work_identifier


@pytest.mark.parametrize("url, paper_id, identifier", [
    ("https://arxiv.org/abs/1706.03762", "", "arxiv:1706.03762"),
    ("http://arxiv.org/abs/1706.03762v5", "vaswani2017attention", "arxiv:1706.03762"),
    ("https://arxiv.org/pdf/1706.03762v2.pdf", "", "arxiv:1706.03762"),
    ("https://export.arxiv.org/abs/cs/0112017", "", "arxiv:cs/0112017"),
    ("https://arxiv.org/abs/math.GT/0309136v1", "", "arxiv:math.gt/0309136"),
    ("", "1412.6980", "arxiv:1412.6980"),
    ("", "2101.00001v3", "arxiv:2101.00001"),
    ("https://doi.org/10.48550/arXiv.1412.6980", "", "arxiv:1412.6980"),  # arXiv's own DOI
    ("https://doi.org/10.1109/CVPR.2016.90", "W2194775991", "doi:10.1109/cvpr.2016.90"),
    ("https://dx.doi.org/10.1103%2FPhysRevD.76.013009", "", "doi:10.1103/physrevd.76.013009"),
    ("", "10.1103/PhysRevD.76.013009", "doi:10.1103/physrevd.76.013009"),  # CSL JSON: the DOI is the ID
    # Neither: another site, an ID that is no arXiv ID or DOI, an arXiv URL of something else.
    ("https://openaccess.thecvf.com/content_cvpr_2016/html/He.html", "he2016deep", ""),
    ("https://openalex.org/W2194775991", "W2194775991", ""),
    ("https://arxiv.org/list/cs.LG/recent", "", ""),
    ("", "a1b2c3d4e5f6", ""),
    ("", "", ""),
])
def test_work_identifier(url, paper_id, identifier):
    assert work_identifier(url, paper_id) == identifier
