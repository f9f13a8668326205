/*
 * fuse: POSIX ACL helpers on the xattr form of an ACL (acl.c).
 */
#ifndef UBTRFS_FUSE_ACL_H
#define UBTRFS_FUSE_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UBTRFS_ACL_ACCESS "system.posix_acl_access"
#define UBTRFS_ACL_DEFAULT "system.posix_acl_default"

/* A well-formed xattr ACL (version 2, whole entries)? */
bool ubtrfs_acl_valid(const void *buf, size_t size);
/* posix_acl_create's masking: the parent's default ACL (a copy, changed in
 * place) and the requested mode limit each other.  1 when the result needs
 * an access ACL, 0 when the mode says it all, -EINVAL on a bad ACL. */
int ubtrfs_acl_create_masq(void *acl, size_t size, uint32_t *mode);
/* posix_acl_chmod: the owner, group-or-mask and other entries follow the
 * new mode.  0 or -EINVAL. */
int ubtrfs_acl_chmod(void *acl, size_t size, uint32_t mode);
/* The permission bits an access ACL gives (into *mode's 0777); 0 when the
 * ACL is equivalent to them (no named entries, no mask), 1 if not. */
int ubtrfs_acl_mode(const void *buf, size_t size, uint32_t *mode);

#endif
