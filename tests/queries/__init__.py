"""The queries' tests (queries/, and simulation/ above them): the reports on hand-worked fleets,
classes, the run view, search, compare, spend and story, the cost reports, dollars as reports
write them, the SQL loader, and the what-if replay of timeout policies."""
