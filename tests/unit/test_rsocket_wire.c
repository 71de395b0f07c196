/*
 * The rsocket protocol's formats (client/librdmacm/rsocket/wire.c, rs.h)
 * against rdma-core's numbers: the immediate's operation bits, the
 * connection data's layout and the 8-bit size scale.
 */
#include "config.h"

#include <byteswap.h>
#include <check.h>
#include <stddef.h>
#include <stdlib.h>

#include "client/librdmacm/rsocket/rs.h"
#include "tests/common/check_run.h"

START_TEST(messages)
{
	/* rdma-core: op << 29 | data; SGL 4, CTRL 7, data 29 bits. */
	ck_assert_uint_eq(rs_msg(RS_OP_DATA, 4096), 0x00001000u);
	ck_assert_uint_eq(rs_msg(RS_OP_SGL, 0x12345), 0x80012345u);
	ck_assert_uint_eq(rs_msg(RS_OP_IOMAP_SGL, 3), 0xC0000003u);
	ck_assert_uint_eq(rs_msg(RS_OP_CTRL, RS_CTRL_SHUTDOWN), 0xE0000002u);
	/* Data beyond 29 bits cannot change the operation. */
	ck_assert_uint_eq(rs_msg_op(rs_msg(RS_OP_DATA, 0xFFFFFFFFu)), RS_OP_DATA);
	ck_assert_uint_eq(rs_msg_data(rs_msg(RS_OP_DATA, 0xFFFFFFFFu)), 0x1FFFFFFFu);
	ck_assert_uint_eq(rs_msg_op(0xE0000001u), RS_OP_CTRL);
	ck_assert_uint_eq(rs_msg_data(0xE0000001u), RS_CTRL_KEEPALIVE);
}
END_TEST

START_TEST(conn_data_layout)
{
	ck_assert_uint_eq(sizeof(struct rs_conn_data), 40);
	ck_assert_uint_eq(offsetof(struct rs_conn_data, credits), 2);
	ck_assert_uint_eq(offsetof(struct rs_conn_data, target_iomap_size), 7);
	ck_assert_uint_eq(offsetof(struct rs_conn_data, target_sgl), 8);
	ck_assert_uint_eq(offsetof(struct rs_conn_data, data_buf), 24);
	ck_assert_uint_eq(offsetof(struct rs_sge, key), 8);
	ck_assert_uint_eq(offsetof(struct rs_sge, length), 12);
	ck_assert_uint_eq(sizeof(struct rs_iomap), 24);
}
END_TEST

START_TEST(size_scale)
{
	unsigned int v;

	ck_assert_uint_eq(rs_scale_encode(0), 0);
	ck_assert_uint_eq(rs_scale_encode(128), 128);
	ck_assert_uint_eq(rs_scale_encode(256), 0x81);
	ck_assert_uint_eq(rs_scale_decode(0x81), 256);
	ck_assert_uint_eq(rs_scale_decode(0xFF), 0x7F00);
	/* Never more entries than there are: the peer writes only those. */
	for (v = 0; v <= 0x7F00; v++)
		ck_assert_uint_le(rs_scale_decode(rs_scale_encode((uint16_t)v)), v);
}
END_TEST

START_TEST(peer_order)
{
	struct rs_sge host = { 0x1122334455667788ull, 0xAABBCCDD, 4096 }, wire;
	struct rs_iomap hm = { 0x10, { 0x20, 0x30, 0x40 } }, wm;

	rs_sge_to_peer(&wire, &host, false);
	ck_assert(wire.addr == host.addr && wire.key == host.key &&
		  wire.length == host.length);
	rs_sge_to_peer(&wire, &host, true);
	ck_assert(wire.addr == bswap_64(host.addr));
	ck_assert_uint_eq(wire.key, bswap_32(host.key));
	ck_assert_uint_eq(wire.length, bswap_32(4096));
	rs_iomap_to_peer(&wm, &hm, true);
	ck_assert(wm.offset == bswap_64(0x10));
	ck_assert(wm.sge.addr == bswap_64(0x20));
	ck_assert_uint_eq(wm.sge.length, bswap_32(0x40));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rsocket_wire");
	TCase *tc = tcase_create("wire");

	tcase_add_test(tc, messages);
	tcase_add_test(tc, conn_data_layout);
	tcase_add_test(tc, size_scale);
	tcase_add_test(tc, peer_order);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
