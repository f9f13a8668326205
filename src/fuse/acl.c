/*
 * fuse: POSIX ACL duties a FUSE filesystem has when it asks the kernel to
 * enforce ACLs (FUSE_CAP_POSIX_ACL): the kernel checks permissions from the
 * cached "system.posix_acl_access" xattrs, and leaves to us what a kernel
 * filesystem's posix_acl_create / posix_acl_chmod / posix_acl_update_mode
 * do - default-ACL inheritance at create (with the umask ignored when the
 * parent has a default ACL), keeping the access ACL and the mode in step.
 *
 * The xattr form (linux/posix_acl_xattr.h): a 4-byte little-endian version
 * (2), then 8-byte entries { le16 tag, le16 perm, le32 id }.
 */
#include "fuse_acl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ACL_VERSION 2
#define TAG_USER_OBJ 0x01
#define TAG_USER 0x02
#define TAG_GROUP_OBJ 0x04
#define TAG_GROUP 0x08
#define TAG_MASK 0x10
#define TAG_OTHER 0x20

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

bool ubtrfs_acl_valid(const void *buf, size_t size)
{
	const uint8_t *p = buf;

	if (size < 4 || (size - 4) % 8 || (size - 4) / 8 > 1024)
		return false;
	return (uint32_t)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24) == ACL_VERSION;
}

/* Entry i's tag and perm fields. */
static uint8_t *entry(uint8_t *acl, size_t i)
{
	return acl + 4 + 8 * i;
}

int ubtrfs_acl_create_masq(void *acl, size_t size, uint32_t *mode)
{
	size_t n = (size - 4) / 8;
	uint8_t *group_obj = NULL, *mask_obj = NULL;
	uint32_t m = *mode;
	int not_equiv = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t *e = entry(acl, i);
		uint16_t perm = get16(e + 2);
		switch (get16(e)) {
		case TAG_USER_OBJ:
			perm &= (m >> 6) & 7;
			put16(e + 2, perm);
			m &= (uint32_t)(perm << 6) | ~(uint32_t)S_IRWXU;
			break;
		case TAG_USER:
		case TAG_GROUP:
			not_equiv = 1;
			break;
		case TAG_GROUP_OBJ:
			group_obj = e;
			break;
		case TAG_OTHER:
			perm &= m & 7;
			put16(e + 2, perm);
			m &= perm | ~(uint32_t)S_IRWXO;
			break;
		case TAG_MASK:
			mask_obj = e;
			not_equiv = 1;
			break;
		default:
			return -EINVAL;
		}
	}
	uint8_t *g = mask_obj ? mask_obj : group_obj;
	if (!g)
		return -EINVAL;
	uint16_t gp = get16(g + 2) & ((m >> 3) & 7);
	put16(g + 2, gp);
	m &= (uint32_t)(gp << 3) | ~(uint32_t)S_IRWXG;
	*mode = m;
	return not_equiv;
}

int ubtrfs_acl_chmod(void *acl, size_t size, uint32_t mode)
{
	size_t n = (size - 4) / 8;
	uint8_t *group_obj = NULL, *mask_obj = NULL;

	for (size_t i = 0; i < n; i++) {
		uint8_t *e = entry(acl, i);
		switch (get16(e)) {
		case TAG_USER_OBJ:
			put16(e + 2, (mode >> 6) & 7);
			break;
		case TAG_GROUP_OBJ:
			group_obj = e;
			break;
		case TAG_MASK:
			mask_obj = e;
			break;
		case TAG_OTHER:
			put16(e + 2, mode & 7);
			break;
		}
	}
	uint8_t *g = mask_obj ? mask_obj : group_obj;
	if (!g)
		return -EINVAL;
	put16(g + 2, (mode >> 3) & 7);
	return 0;
}

int ubtrfs_acl_mode(const void *buf, size_t size, uint32_t *mode)
{
	const uint8_t *acl = buf;
	size_t n = (size - 4) / 8;
	uint32_t m = 0, g = 0, mask = 0;
	bool has_mask = false, equiv = true;

	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = acl + 4 + 8 * i;
		uint32_t perm = get16(e + 2) & 7;
		switch (get16(e)) {
		case TAG_USER_OBJ:
			m |= perm << 6;
			break;
		case TAG_GROUP_OBJ:
			g = perm;
			break;
		case TAG_OTHER:
			m |= perm;
			break;
		case TAG_MASK:
			mask = perm;
			has_mask = true;
			equiv = false;
			break;
		case TAG_USER:
		case TAG_GROUP:
			equiv = false;
			break;
		default:
			return -EINVAL;
		}
	}
	m |= (has_mask ? mask : g) << 3;
	*mode = (*mode & ~(uint32_t)0777) | m;
	return equiv ? 0 : 1;
}
