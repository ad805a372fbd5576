"""Memory settings every budgetscope process starts with, before NumPy is imported.

NumPy asks the kernel for transparent huge pages (madvise) for every array of 4 MB or more.
Where free memory is fragmented, the kernel then compacts memory inside the page fault, 2 MB at
a time, and the thread that touched the array waits. Measured on the project's 2-core VM: 37 MB
of fresh arrays took 0.08-0.31 s with huge pages asked for and 0.015-0.028 s without; What if's
prepare over 586k steps spent 0.4-0.9 s in the kernel with them and 0.06-0.10 s without, which
made it the slowest part of the page's first visit. The arrays here live for one page run or one
batch, too briefly for huge pages to pay back. NUMPY_MADVISE_HUGEPAGE is NumPy's documented switch
and is read once, when NumPy is imported, so it is set when the budgetscope package is; a value
already in the environment is kept. The app started another way (`streamlit run`, which imports
NumPy before the app's code) keeps NumPy's default.
"""

from __future__ import annotations

import os

NUMPY_HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"


def prefer_small_pages() -> None:
    """Have NumPy leave the kernel's default page size alone, unless the user chose."""
    os.environ.setdefault(NUMPY_HUGEPAGE_ENV, "0")
