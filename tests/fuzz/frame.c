/*
 * Fuzz harness: one received frame, as the daemon takes it apart before a
 * handler sees it.  The input is the message recvmsg() would return:
 * common/frame.c's header checks (ibvd_frame_parse), then the row of the
 * request table for its type (daemon/request.c) and its payload unpacked
 * with that row's descriptor, as server/call.c does.  Besides what the
 * sanitizers catch, it holds the code to its promises and aborts where
 * one is broken:
 * - a frame parses exactly when it has a whole header with our magic and
 *   version and a len equal to what follows it;
 * - a payload that unpacks, and has no field its descriptors do not
 *   know (at any depth), packs again to bytes that unpack to the same packing
 *   (protobuf-c's canonical form is a fixed point).  Unknown fields are
 *   left out: protobuf-c 1.4 accepts a payload with an unknown field
 *   whose tag is 80 00 (field number 0, in two bytes) and then refuses
 *   its own packing of it (regressions/frame/unknown-field-zero, and
 *   unknown-field-zero-nested inside MODIFY_QP's attr).  The
 *   daemon never packs a client's message again: nothing of ours
 *   depends on it.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)

static int expected_parse(const uint8_t *data, size_t size)
{
	struct ibvd_frame_hdr hdr;

	if (size < sizeof(hdr))
		return -EBADMSG;
	memcpy(&hdr, data, sizeof(hdr));
	if (hdr.magic != IBVD_FRAME_MAGIC)
		return -EBADMSG;
	if (hdr.version != IBVD_PROTO_VERSION)
		return -EPROTO;
	return hdr.len == size - sizeof(hdr) ? 0 : -EBADMSG;
}

/* Whether msg or any message inside it kept fields its descriptor lacks */
static bool has_unknown_fields(const ProtobufCMessage *msg)
{
	const ProtobufCMessageDescriptor *desc = msg->descriptor;
	const ProtobufCMessage *const *subs;
	const ProtobufCFieldDescriptor *f;
	unsigned int i;
	size_t n, j;

	if (msg->n_unknown_fields)
		return true;
	for (i = 0; i < desc->n_fields; i++) {
		f = &desc->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(const size_t *)((const char *)msg + f->quantifier_offset);
			subs = *(const ProtobufCMessage *const *const *)
				((const char *)msg + f->offset);
		} else {
			n = 1;
			subs = (const ProtobufCMessage *const *)
				((const char *)msg + f->offset);
		}
		for (j = 0; j < n; j++)
			if (subs[j] && has_unknown_fields(subs[j]))
				return true;
	}
	return false;
}

/* Packing what was unpacked is stable: pack, unpack, pack gives the same */
static void repack(const ProtobufCMessageDescriptor *desc,
		   const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg), len2;
	uint8_t *out = malloc(len ? len : 1), *again;
	ProtobufCMessage *msg2;

	CHECK(out);
	CHECK(protobuf_c_message_pack(msg, out) == len);
	msg2 = protobuf_c_message_unpack(desc, NULL, len, out);
	CHECK(msg2);
	len2 = protobuf_c_message_get_packed_size(msg2);
	CHECK(len2 == len);
	again = malloc(len2 ? len2 : 1);
	CHECK(again);
	CHECK(protobuf_c_message_pack(msg2, again) == len2);
	CHECK(memcmp(out, again, len) == 0);
	free(again);
	protobuf_c_message_free_unpacked(msg2, NULL);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct ibvd_request_type *rt;
	const ProtobufCMessageDescriptor *desc;
	struct ibvd_frame frame;
	ProtobufCMessage *msg;
	int err;

	memset(&frame, 0, sizeof(frame));
	err = ibvd_frame_parse(data, size, &frame);
	CHECK(err == expected_parse(data, size));
	if (err)
		return 0;
	CHECK(frame.payload == data + sizeof(frame.hdr));
	rt = ibvd_request_type_find(frame.hdr.type);
	if (!rt)
		return 0;
	CHECK(rt->type == frame.hdr.type && rt->handler && rt->states);
	desc = rt->payload ? rt->payload : &ibvd__empty__descriptor;
	msg = protobuf_c_message_unpack(desc, NULL, frame.hdr.len,
					frame.payload);
	if (!msg)
		return 0;
	CHECK(msg->descriptor == desc);
	if (!has_unknown_fields(msg))
		repack(desc, msg);
	protobuf_c_message_free_unpacked(msg, NULL);
	return 0;
}
