# Unit tests (make check).  Each area adds its programs through its own fragment.
include $(srcdir)/tests/unit/core.mk
include $(srcdir)/tests/unit/avro.mk
include $(srcdir)/tests/unit/config.mk
