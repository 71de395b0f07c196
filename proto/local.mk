# The client<->daemon protocol, compiled by protoc-c into proto/.
BUILT_SOURCES += proto/ibverbsd.pb-c.c proto/ibverbsd.pb-c.h
CLEANFILES += proto/ibverbsd.pb-c.c proto/ibverbsd.pb-c.h
EXTRA_DIST += proto/ibverbsd.proto proto/PROTOCOL.md

proto/ibverbsd.pb-c.c proto/ibverbsd.pb-c.h: proto/ibverbsd.proto
	$(AM_V_GEN)$(MKDIR_P) proto && \
	$(PROTOC_C) --proto_path=$(srcdir)/proto --c_out=proto $(srcdir)/proto/ibverbsd.proto
