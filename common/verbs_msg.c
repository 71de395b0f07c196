/*
 * Verbs attributes <-> protobuf messages (verbs_msg.h).
 */
#include "config.h"

#include <string.h>

#include "verbs_msg.h"

void ibvd_ah_attr_to_msg(const struct ibv_ah_attr *a, Ibvd__AhAttr *m)
{
	m->dgid.data = (uint8_t *)a->grh.dgid.raw;
	m->dgid.len = a->is_global ? sizeof(a->grh.dgid.raw) : 0;
	m->flow_label = a->grh.flow_label;
	m->sgid_index = a->grh.sgid_index;
	m->hop_limit = a->grh.hop_limit;
	m->traffic_class = a->grh.traffic_class;
	m->dlid = a->dlid;
	m->sl = a->sl;
	m->src_path_bits = a->src_path_bits;
	m->static_rate = a->static_rate;
	m->is_global = a->is_global;
	m->port_num = a->port_num;
}

void ibvd_ah_attr_from_msg(const Ibvd__AhAttr *m, struct ibv_ah_attr *a)
{
	memset(a, 0, sizeof(*a));
	if (!m)
		return;
	if (m->dgid.len == sizeof(a->grh.dgid.raw))
		memcpy(a->grh.dgid.raw, m->dgid.data, sizeof(a->grh.dgid.raw));
	a->grh.flow_label = m->flow_label;
	a->grh.sgid_index = (uint8_t)m->sgid_index;
	a->grh.hop_limit = (uint8_t)m->hop_limit;
	a->grh.traffic_class = (uint8_t)m->traffic_class;
	a->dlid = (uint16_t)m->dlid;
	a->sl = (uint8_t)m->sl;
	a->src_path_bits = (uint8_t)m->src_path_bits;
	a->static_rate = (uint8_t)m->static_rate;
	a->is_global = m->is_global;
	a->port_num = (uint8_t)m->port_num;
}

void ibvd_qp_cap_from_msg(const Ibvd__QpCap *m, struct ibv_qp_cap *cap)
{
	memset(cap, 0, sizeof(*cap));
	if (!m)
		return;
	cap->max_send_wr = m->max_send_wr;
	cap->max_recv_wr = m->max_recv_wr;
	cap->max_send_sge = m->max_send_sge;
	cap->max_recv_sge = m->max_recv_sge;
	cap->max_inline_data = m->max_inline_data;
}

void ibvd_qp_attr_to_msg(const struct ibv_qp_attr *a, Ibvd__QpAttr *m)
{
	m->qp_state = a->qp_state;
	m->cur_qp_state = a->cur_qp_state;
	m->path_mtu = a->path_mtu;
	m->path_mig_state = a->path_mig_state;
	m->qkey = a->qkey;
	m->rq_psn = a->rq_psn;
	m->sq_psn = a->sq_psn;
	m->dest_qp_num = a->dest_qp_num;
	m->qp_access_flags = (uint32_t)a->qp_access_flags;
	m->pkey_index = a->pkey_index;
	m->alt_pkey_index = a->alt_pkey_index;
	m->en_sqd_async_notify = a->en_sqd_async_notify;
	m->sq_draining = a->sq_draining;
	m->max_rd_atomic = a->max_rd_atomic;
	m->max_dest_rd_atomic = a->max_dest_rd_atomic;
	m->min_rnr_timer = a->min_rnr_timer;
	m->port_num = a->port_num;
	m->timeout = a->timeout;
	m->retry_cnt = a->retry_cnt;
	m->rnr_retry = a->rnr_retry;
	m->alt_port_num = a->alt_port_num;
	m->alt_timeout = a->alt_timeout;
	m->rate_limit = a->rate_limit;
}

void ibvd_qp_attr_from_msg(const Ibvd__QpAttr *m, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	if (!m)
		return;
	a->qp_state = (enum ibv_qp_state)m->qp_state;
	a->cur_qp_state = (enum ibv_qp_state)m->cur_qp_state;
	a->path_mtu = (enum ibv_mtu)m->path_mtu;
	a->path_mig_state = (enum ibv_mig_state)m->path_mig_state;
	a->qkey = m->qkey;
	a->rq_psn = m->rq_psn;
	a->sq_psn = m->sq_psn;
	a->dest_qp_num = m->dest_qp_num;
	a->qp_access_flags = (unsigned int)m->qp_access_flags;
	ibvd_qp_cap_from_msg(m->cap, &a->cap);
	ibvd_ah_attr_from_msg(m->ah_attr, &a->ah_attr);
	ibvd_ah_attr_from_msg(m->alt_ah_attr, &a->alt_ah_attr);
	a->pkey_index = (uint16_t)m->pkey_index;
	a->alt_pkey_index = (uint16_t)m->alt_pkey_index;
	a->en_sqd_async_notify = (uint8_t)m->en_sqd_async_notify;
	a->sq_draining = (uint8_t)m->sq_draining;
	a->max_rd_atomic = (uint8_t)m->max_rd_atomic;
	a->max_dest_rd_atomic = (uint8_t)m->max_dest_rd_atomic;
	a->min_rnr_timer = (uint8_t)m->min_rnr_timer;
	a->port_num = (uint8_t)m->port_num;
	a->timeout = (uint8_t)m->timeout;
	a->retry_cnt = (uint8_t)m->retry_cnt;
	a->rnr_retry = (uint8_t)m->rnr_retry;
	a->alt_port_num = (uint8_t)m->alt_port_num;
	a->alt_timeout = (uint8_t)m->alt_timeout;
	a->rate_limit = m->rate_limit;
}
