! Fortran collectives through `use mpi` (fortran.test): every result checked
! on every rank, integers bit-exact, reals against a float64 reference.
!
! Each rank prints "test_fortran: rank R: N passed, M failed"; rank 0 then
! prints the calls it made per collective ("test_fortran: calls bcast 4
! ibcast 1 ..."), every rank making the same ones, so that the test can
! compare them with collar's statistics: a Fortran call that does not reach
! collar is missing there.
program test_fortran
    use mpi
    implicit none
    integer, parameter :: dp = kind(1.0d0)
    integer, parameter :: ncoll = 26
    character(len=24), parameter :: names(ncoll) = [character(len=24) :: &
        'allreduce', 'iallreduce', 'bcast', 'ibcast', 'allgather', 'iallgather', &
        'reduce', 'ireduce', 'alltoall', 'gather', 'scatter', 'gatherv', &
        'allgatherv', 'iallgatherv', 'alltoallv', 'ialltoallv', &
        'reduce_scatter', 'ireduce_scatter', 'reduce_scatter_block', &
        'ireduce_scatter_block', 'scatterv', 'iscatterv', 'ialltoall', 'igather', &
        'iscatter', 'igatherv']
    integer :: calls(ncoll)
    integer :: rank, nranks, ierr, npass, nfail
    integer :: sizes(3), k
    character(len=1000) :: line
    character(len=12) :: num

    calls = 0
    npass = 0
    nfail = 0
    call MPI_Init(ierr)
    call check(ierr == MPI_SUCCESS, 'MPI_Init ierror')
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)

    sizes = [1, 1000, 300007]
    do k = 1, size(sizes)
        call t_allreduce_int(sizes(k))
        call t_allreduce_real8(sizes(k))
        call t_allreduce_misc(sizes(k))
        call t_iallreduce(sizes(k))
        call t_bcast(sizes(k))
        call t_allgather(sizes(k))
        call t_reduce(sizes(k))
    end do
    call t_others()
    call t_vector()
    call t_nonblocking()
    call t_p2p()
    call t_errors()

    write (*, '(a,i0,a,i0,a,i0,a)') 'test_fortran: rank ', rank, ': ', &
        npass, ' passed, ', nfail, ' failed'
    if (rank == 0) then
        line = 'test_fortran: calls'
        do k = 1, ncoll
            write (num, '(i0)') calls(k)
            line = trim(line) // ' ' // trim(names(k)) // ' ' // trim(num)
        end do
        write (*, '(a)') trim(line)
    end if
    call MPI_Finalize(ierr)
    if (nfail > 0) stop 1

contains

    subroutine check(ok, what)
        logical, intent(in) :: ok
        character(len=*), intent(in) :: what
        if (ok) then
            npass = npass + 1
        else
            nfail = nfail + 1
            write (*, '(a,i0,a,a)') 'test_fortran: FAIL rank ', rank, ': ', what
        end if
    end subroutine check

    subroutine count(i)
        integer, intent(in) :: i
        calls(i) = calls(i) + 1
    end subroutine count

    ! sum over ranks r of r * 7 + i * 3 + 1, exactly
    integer function isum(i)
        integer, intent(in) :: i
        isum = 7 * (nranks * (nranks - 1) / 2) + nranks * (i * 3 + 1)
    end function isum

    real(dp) function xval(r, i)
        integer, intent(in) :: r, i
        xval = 1.0_dp / real(r + 3, dp) + real(mod(i, 97), dp) * 0.125_dp
    end function xval

    real(dp) function xsum(i)
        integer, intent(in) :: i
        integer :: r
        xsum = 0.0_dp
        do r = 0, nranks - 1
            xsum = xsum + xval(r, i)
        end do
    end function xsum

    logical function close8(a, ref)
        real(dp), intent(in) :: a, ref
        close8 = abs(a - ref) <= 1.0e-12_dp * max(1.0_dp, abs(ref))
    end function close8

    subroutine t_allreduce_int(n)
        integer, intent(in) :: n
        integer, allocatable :: a(:), b(:)
        integer :: i
        logical :: ok
        allocate (a(n), b(n))
        do i = 1, n
            a(i) = rank * 7 + i * 3 + 1
        end do
        b = -1
        call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
        call count(1)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            ok = ok .and. b(i) == isum(i)
        end do
        call check(ok, 'allreduce integer sum')
        ! in place
        call MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_INTEGER, MPI_SUM, &
                           MPI_COMM_WORLD, ierr)
        call count(1)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            ok = ok .and. a(i) == isum(i)
        end do
        call check(ok, 'allreduce integer sum in place')
        deallocate (a, b)
    end subroutine t_allreduce_int

    subroutine t_allreduce_real8(n)
        integer, intent(in) :: n
        real(dp), allocatable :: x(:), y(:)
        integer :: i
        logical :: ok
        allocate (x(n), y(n))
        do i = 1, n
            x(i) = xval(rank, i)
        end do
        y = -1.0_dp
        call MPI_Allreduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                           MPI_COMM_WORLD, ierr)
        call count(1)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            ok = ok .and. close8(y(i), xsum(i))
        end do
        call check(ok, 'allreduce real*8 sum')
        call MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_REAL8, MPI_MAX, &
                           MPI_COMM_WORLD, ierr)
        call count(1)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            ok = ok .and. x(i) == xval(0, i)
        end do
        call check(ok, 'allreduce real*8 max in place')
        deallocate (x, y)
    end subroutine t_allreduce_real8

    ! integer*8, real*4 and the logical and min operators
    subroutine t_allreduce_misc(n)
        integer, intent(in) :: n
        integer(kind=8), allocatable :: l(:), lr(:)
        real, allocatable :: s(:), sr(:)
        integer :: i
        logical :: ok
        allocate (l(n), lr(n), s(n), sr(n))
        do i = 1, n
            l(i) = int(rank + 1, 8) * 4294967296_8 + int(i, 8)
            s(i) = real(rank + 1) * 0.5 + real(mod(i, 13))
        end do
        call MPI_Allreduce(l, lr, n, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
        call count(1)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            ok = ok .and. lr(i) == int(nranks * (nranks + 1) / 2, 8) * 4294967296_8 &
                                 + int(nranks, 8) * int(i, 8)
        end do
        call check(ok, 'allreduce integer*8 sum')
        call MPI_Allreduce(s, sr, n, MPI_REAL, MPI_MIN, MPI_COMM_WORLD, ierr)
        call count(1)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            ok = ok .and. real(sr(i), dp) == 0.5_dp + real(mod(i, 13), dp)
        end do
        call check(ok, 'allreduce real*4 min')
        deallocate (l, lr, s, sr)
    end subroutine t_allreduce_misc

    ! MPI_Iallreduce completed by MPI_Wait (with and without a status),
    ! MPI_Waitall, MPI_Test, MPI_Waitany and MPI_Waitsome
    subroutine t_iallreduce(n)
        integer, intent(in) :: n
        integer, allocatable :: a(:), b(:), c(:)
        real(dp), allocatable :: x(:)
        integer :: req, reqs(3), st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 3)
        integer :: i, idx, outcount, indices(3), done
        logical :: ok, flag
        allocate (a(n), b(n), c(n), x(n))
        do i = 1, n
            a(i) = rank * 7 + i * 3 + 1
            x(i) = xval(rank, i)
        end do
        b = -1
        call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
        call count(2)
        ok = ierr == MPI_SUCCESS
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
        ok = ok .and. ierr == MPI_SUCCESS .and. req == MPI_REQUEST_NULL
        do i = 1, n
            ok = ok .and. b(i) == isum(i)
        end do
        call check(ok, 'iallreduce integer + MPI_Wait')

        b = -1
        call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, req, ierr)
        call count(2)
        ok = ierr == MPI_SUCCESS
        call MPI_Wait(req, st, ierr)
        ok = ok .and. ierr == MPI_SUCCESS .and. req == MPI_REQUEST_NULL
        do i = 1, n
            ok = ok .and. b(i) == (nranks - 1) * 7 + i * 3 + 1
        end do
        call check(ok, 'iallreduce integer max + MPI_Wait with status')

        ! two at once, one in place, completed by MPI_Waitall
        b = -1
        call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(1), ierr)
        call count(2)
        ok = ierr == MPI_SUCCESS
        call MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                            MPI_COMM_WORLD, reqs(2), ierr)
        call count(2)
        ok = ok .and. ierr == MPI_SUCCESS
        call MPI_Waitall(2, reqs, sts, ierr)
        ok = ok .and. ierr == MPI_SUCCESS .and. all(reqs(1:2) == MPI_REQUEST_NULL)
        do i = 1, n
            ok = ok .and. b(i) == isum(i) .and. close8(x(i), xsum(i))
        end do
        call check(ok, 'iallreduce x2 (one in place) + MPI_Waitall')

        ! MPI_Test until done
        c = -1
        call MPI_Iallreduce(a, c, n, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD, req, ierr)
        call count(2)
        ok = ierr == MPI_SUCCESS
        flag = .false.
        do while (.not. flag .and. ierr == MPI_SUCCESS)
            call MPI_Test(req, flag, MPI_STATUS_IGNORE, ierr)
        end do
        ok = ok .and. ierr == MPI_SUCCESS .and. req == MPI_REQUEST_NULL
        do i = 1, n
            ok = ok .and. c(i) == i * 3 + 1
        end do
        call check(ok, 'iallreduce integer min + MPI_Test')

        ! three, completed by MPI_Waitany then MPI_Waitsome
        b = -1
        c = -1
        do i = 1, n
            x(i) = xval(rank, i)
        end do
        call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(1), ierr)
        call MPI_Iallreduce(a, c, n, MPI_INTEGER, MPI_BOR, MPI_COMM_WORLD, reqs(2), ierr)
        call MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                            MPI_COMM_WORLD, reqs(3), ierr)
        call count(2)
        call count(2)
        call count(2)
        call MPI_Waitany(3, reqs, idx, st, ierr)
        ok = ierr == MPI_SUCCESS .and. idx >= 1 .and. idx <= 3
        if (ok) ok = reqs(idx) == MPI_REQUEST_NULL
        done = 1
        do while (done < 3 .and. ierr == MPI_SUCCESS)
            call MPI_Waitsome(3, reqs, outcount, indices, sts, ierr)
            if (outcount == MPI_UNDEFINED) exit
            do i = 1, outcount
                ok = ok .and. indices(i) >= 1 .and. indices(i) <= 3
            end do
            done = done + outcount
        end do
        ok = ok .and. ierr == MPI_SUCCESS .and. done == 3 &
                .and. all(reqs == MPI_REQUEST_NULL)
        do i = 1, n
            ok = ok .and. b(i) == isum(i) .and. close8(x(i), xsum(i))
        end do
        call check(ok, 'iallreduce x3 + MPI_Waitany + MPI_Waitsome')
        deallocate (a, b, c, x)
    end subroutine t_iallreduce

    subroutine t_bcast(n)
        integer, intent(in) :: n
        integer, allocatable :: a(:)
        real(dp), allocatable :: x(:)
        integer :: i, root, req
        logical :: ok
        allocate (a(n), x(n))
        root = nranks - 1
        do i = 1, n
            a(i) = merge(i * 5 - 2, -7, rank == root)
            x(i) = merge(xval(0, i), -1.0_dp, rank == 0)
        end do
        call MPI_Bcast(a, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
        call count(3)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            ok = ok .and. a(i) == i * 5 - 2
        end do
        call check(ok, 'bcast integer')
        call MPI_Bcast(x, n, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
        call count(3)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            ok = ok .and. x(i) == xval(0, i)
        end do
        call check(ok, 'bcast real*8')
        a = merge(11, 0, rank == 0)
        call MPI_Ibcast(a, n, MPI_INTEGER, 0, MPI_COMM_WORLD, req, ierr)
        call count(4)
        ok = ierr == MPI_SUCCESS
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
        ok = ok .and. ierr == MPI_SUCCESS .and. all(a == 11)
        call check(ok, 'ibcast integer + MPI_Wait')
        deallocate (a, x)
    end subroutine t_bcast

    subroutine t_allgather(n)
        integer, intent(in) :: n
        integer, allocatable :: a(:), g(:)
        integer :: i, r, req
        logical :: ok
        allocate (a(n), g(n * nranks))
        do i = 1, n
            a(i) = rank * 100000 + i
        end do
        g = -1
        call MPI_Allgather(a, n, MPI_INTEGER, g, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
        call count(5)
        ok = ierr == MPI_SUCCESS
        do r = 0, nranks - 1
            do i = 1, n
                ok = ok .and. g(r * n + i) == r * 100000 + i
            end do
        end do
        call check(ok, 'allgather integer')
        ! in place: each rank's block already in g
        g = -1
        g(rank * n + 1:rank * n + n) = a
        call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g, n, MPI_INTEGER, &
                           MPI_COMM_WORLD, ierr)
        call count(5)
        ok = ierr == MPI_SUCCESS
        do r = 0, nranks - 1
            do i = 1, n
                ok = ok .and. g(r * n + i) == r * 100000 + i
            end do
        end do
        call check(ok, 'allgather integer in place')
        g = -1
        call MPI_Iallgather(a, n, MPI_INTEGER, g, n, MPI_INTEGER, MPI_COMM_WORLD, &
                            req, ierr)
        call count(6)
        ok = ierr == MPI_SUCCESS
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
        ok = ok .and. ierr == MPI_SUCCESS
        do r = 0, nranks - 1
            do i = 1, n
                ok = ok .and. g(r * n + i) == r * 100000 + i
            end do
        end do
        call check(ok, 'iallgather integer + MPI_Wait')
        deallocate (a, g)
    end subroutine t_allgather

    subroutine t_reduce(n)
        integer, intent(in) :: n
        integer, allocatable :: a(:), b(:)
        real(dp), allocatable :: x(:), y(:)
        integer :: i, root, req
        logical :: ok
        allocate (a(n), b(n), x(n), y(n))
        root = mod(1, nranks)
        do i = 1, n
            a(i) = rank * 7 + i * 3 + 1
            x(i) = xval(rank, i)
        end do
        b = -1
        call MPI_Reduce(a, b, n, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
        call count(7)
        ok = ierr == MPI_SUCCESS
        do i = 1, n
            if (rank == root) then
                ok = ok .and. b(i) == isum(i)
            else
                ok = ok .and. b(i) == -1
            end if
        end do
        call check(ok, 'reduce integer sum')
        ! in place at the root
        if (rank == 0) then
            call MPI_Reduce(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, 0, &
                            MPI_COMM_WORLD, ierr)
        else
            call MPI_Reduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, 0, &
                            MPI_COMM_WORLD, ierr)
        end if
        call count(7)
        ok = ierr == MPI_SUCCESS
        if (rank == 0) then
            do i = 1, n
                ok = ok .and. close8(x(i), xsum(i))
            end do
        end if
        call check(ok, 'reduce real*8 sum in place at the root')
        b = -1
        call MPI_Ireduce(a, b, n, MPI_INTEGER, MPI_MAX, 0, MPI_COMM_WORLD, req, ierr)
        call count(8)
        ok = ierr == MPI_SUCCESS
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
        ok = ok .and. ierr == MPI_SUCCESS
        if (rank == 0) then
            do i = 1, n
                ok = ok .and. b(i) == (nranks - 1) * 7 + i * 3 + 1
            end do
        end if
        call check(ok, 'ireduce integer max + MPI_Wait')
        deallocate (a, b, x, y)
    end subroutine t_reduce

    ! alltoall, gather, scatter, gatherv on small counts
    subroutine t_others()
        integer :: s(4 * nranks), r(4 * nranks), counts(nranks), displs(nranks)
        integer :: i, j, total
        logical :: ok
        do j = 0, nranks - 1
            do i = 1, 4
                s(j * 4 + i) = rank * 1000 + j * 10 + i
            end do
        end do
        r = -1
        call MPI_Alltoall(s, 4, MPI_INTEGER, r, 4, MPI_INTEGER, MPI_COMM_WORLD, ierr)
        call count(9)
        ok = ierr == MPI_SUCCESS
        do j = 0, nranks - 1
            do i = 1, 4
                ok = ok .and. r(j * 4 + i) == j * 1000 + rank * 10 + i
            end do
        end do
        call check(ok, 'alltoall integer')

        r = -1
        call MPI_Gather(s, 4, MPI_INTEGER, r, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
        call count(10)
        ok = ierr == MPI_SUCCESS
        if (rank == 0) then
            do j = 0, nranks - 1
                do i = 1, 4
                    ok = ok .and. r(j * 4 + i) == j * 1000 + i
                end do
            end do
        end if
        call check(ok, 'gather integer')

        ! scatter, in place at the root
        if (rank == 0) then
            call MPI_Scatter(s, 4, MPI_INTEGER, MPI_IN_PLACE, 4, MPI_INTEGER, 0, &
                             MPI_COMM_WORLD, ierr)
        else
            r = -1
            call MPI_Scatter(s, 4, MPI_INTEGER, r, 4, MPI_INTEGER, 0, &
                             MPI_COMM_WORLD, ierr)
        end if
        call count(11)
        ok = ierr == MPI_SUCCESS
        if (rank /= 0) then
            do i = 1, 4
                ok = ok .and. r(i) == rank * 10 + i
            end do
        end if
        call check(ok, 'scatter integer (in place at the root)')

        ! gatherv: rank j sends j + 1 elements
        total = 0
        do j = 1, nranks
            counts(j) = j
            displs(j) = total
            total = total + j
        end do
        r = -1
        call MPI_Gatherv(s, rank + 1, MPI_INTEGER, r, counts, displs, MPI_INTEGER, &
                         nranks - 1, MPI_COMM_WORLD, ierr)
        call count(12)
        ok = ierr == MPI_SUCCESS
        if (rank == nranks - 1) then
            do j = 0, nranks - 1
                do i = 1, j + 1
                    ok = ok .and. r(displs(j + 1) + i) == j * 1000 + i
                end do
            end do
        end if
        call check(ok, 'gatherv integer')
    end subroutine t_others

    ! the v forms and the reduce_scatters, blocking then nonblocking
    ! (completed by MPI_Testall, MPI_Testany, MPI_Testsome and MPI_Wait);
    ! rank j's share is j + 1 elements
    subroutine t_vector()
        integer :: counts(nranks), displs(nranks), rcnts(nranks), rdispls(nranks)
        integer :: s(nranks * (nranks + 1)), r(nranks * (nranks + 1))
        integer :: reqs(4), sts(MPI_STATUS_SIZE, 4), idx, outcount, indices(4)
        integer :: i, j, total, nb, done
        logical :: ok, flag
        total = 0
        do j = 1, nranks
            counts(j) = j
            displs(j) = total
            total = total + j
        end do
        do nb = 0, 1
            ! allgatherv: rank j gives j + 1 elements j * 100 + i
            do i = 1, rank + 1
                s(i) = rank * 100 + i
            end do
            r = -1
            if (nb == 0) then
                call MPI_Allgatherv(s, rank + 1, MPI_INTEGER, r, counts, displs, &
                                    MPI_INTEGER, MPI_COMM_WORLD, ierr)
                call count(13)
            else
                call MPI_Iallgatherv(s, rank + 1, MPI_INTEGER, r, counts, displs, &
                                     MPI_INTEGER, MPI_COMM_WORLD, reqs(1), ierr)
                call count(14)
                flag = .false.
                do while (.not. flag .and. ierr == MPI_SUCCESS)
                    call MPI_Testall(1, reqs, flag, sts, ierr)
                end do
            end if
            ok = ierr == MPI_SUCCESS
            do j = 0, nranks - 1
                do i = 1, j + 1
                    ok = ok .and. r(displs(j + 1) + i) == j * 100 + i
                end do
            end do
            call check(ok, 'allgatherv / iallgatherv + MPI_Testall')

            ! alltoallv: rank q sends j + 1 elements q * 1000 + j * 10 + i to rank j
            do j = 0, nranks - 1
                rcnts(j + 1) = rank + 1
                rdispls(j + 1) = j * (rank + 1)
                do i = 1, j + 1
                    s(displs(j + 1) + i) = rank * 1000 + j * 10 + i
                end do
            end do
            r = -1
            if (nb == 0) then
                call MPI_Alltoallv(s, counts, displs, MPI_INTEGER, r, rcnts, rdispls, &
                                   MPI_INTEGER, MPI_COMM_WORLD, ierr)
                call count(15)
            else
                call MPI_Ialltoallv(s, counts, displs, MPI_INTEGER, r, rcnts, rdispls, &
                                    MPI_INTEGER, MPI_COMM_WORLD, reqs(1), ierr)
                call count(16)
                reqs(2) = MPI_REQUEST_NULL
                flag = .false.
                do while (.not. flag .and. ierr == MPI_SUCCESS)
                    call MPI_Testany(2, reqs, idx, flag, MPI_STATUS_IGNORE, ierr)
                end do
                ok = idx == 1 .and. reqs(1) == MPI_REQUEST_NULL
                call check(ok, 'ialltoallv + MPI_Testany: index 1, request freed')
            end if
            ok = ierr == MPI_SUCCESS
            do j = 0, nranks - 1
                do i = 1, rank + 1
                    ok = ok .and. r(j * (rank + 1) + i) == j * 1000 + rank * 10 + i
                end do
            end do
            call check(ok, 'alltoallv / ialltoallv')

            ! reduce_scatter: rank j gets j + 1 elements of the sum
            do i = 1, total
                s(i) = rank * 7 + i
            end do
            r = -1
            if (nb == 0) then
                call MPI_Reduce_scatter(s, r, counts, MPI_INTEGER, MPI_SUM, &
                                        MPI_COMM_WORLD, ierr)
                call count(17)
            else
                call MPI_Ireduce_scatter(s, r, counts, MPI_INTEGER, MPI_SUM, &
                                         MPI_COMM_WORLD, reqs(1), ierr)
                call count(18)
                done = 0
                do while (done == 0 .and. ierr == MPI_SUCCESS)
                    call MPI_Testsome(1, reqs, outcount, indices, sts, ierr)
                    if (outcount == MPI_UNDEFINED) exit
                    done = done + outcount
                end do
                call check(done == 1 .and. indices(1) == 1 .and. &
                           reqs(1) == MPI_REQUEST_NULL, &
                           'ireduce_scatter + MPI_Testsome: index 1, request freed')
            end if
            ok = ierr == MPI_SUCCESS
            do i = 1, rank + 1
                ok = ok .and. r(i) == 7 * (nranks * (nranks - 1) / 2) &
                                     + nranks * (displs(rank + 1) + i)
            end do
            call check(ok, 'reduce_scatter / ireduce_scatter + MPI_Testsome')

            ! reduce_scatter_block of 2 elements a rank, in place the second time
            do i = 1, 2 * nranks
                s(i) = rank * 7 + i
            end do
            r = -1
            if (nb == 0) then
                call MPI_Reduce_scatter_block(s, r, 2, MPI_INTEGER, MPI_SUM, &
                                              MPI_COMM_WORLD, ierr)
                call count(19)
            else
                r(1:2 * nranks) = s(1:2 * nranks)
                call MPI_Ireduce_scatter_block(MPI_IN_PLACE, r, 2, MPI_INTEGER, MPI_SUM, &
                                               MPI_COMM_WORLD, reqs(1), ierr)
                call count(20)
                call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
            end if
            ok = ierr == MPI_SUCCESS
            do i = 1, 2
                ok = ok .and. r(i) == 7 * (nranks * (nranks - 1) / 2) &
                                     + nranks * (2 * rank + i)
            end do
            call check(ok, 'reduce_scatter_block / ireduce_scatter_block in place')

            ! scatterv from the last rank: j + 1 elements j * 10 + i to rank j
            do j = 0, nranks - 1
                do i = 1, j + 1
                    s(displs(j + 1) + i) = j * 10 + i
                end do
            end do
            r = -1
            if (nb == 0) then
                call MPI_Scatterv(s, counts, displs, MPI_INTEGER, r, rank + 1, &
                                  MPI_INTEGER, nranks - 1, MPI_COMM_WORLD, ierr)
                call count(21)
            else
                call MPI_Iscatterv(s, counts, displs, MPI_INTEGER, r, rank + 1, &
                                   MPI_INTEGER, nranks - 1, MPI_COMM_WORLD, reqs(1), ierr)
                call count(22)
                call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
            end if
            ok = ierr == MPI_SUCCESS
            do i = 1, rank + 1
                ok = ok .and. r(i) == rank * 10 + i
            end do
            call check(ok, 'scatterv / iscatterv')
        end do
    end subroutine t_vector

    ! ialltoall, igather, iscatter and igatherv at once, completed by one
    ! MPI_Waitall with statuses
    subroutine t_nonblocking()
        integer :: s(4 * nranks), r1(4 * nranks), r2(4 * nranks), r3(4), r4(4 * nranks)
        integer :: counts(nranks), displs(nranks), reqs(4), sts(MPI_STATUS_SIZE, 4)
        integer :: i, j
        logical :: ok
        do j = 0, nranks - 1
            counts(j + 1) = 2
            displs(j + 1) = 2 * (nranks - 1 - j)
            do i = 1, 4
                s(j * 4 + i) = rank * 1000 + j * 10 + i
            end do
        end do
        r1 = -1
        r2 = -1
        r3 = -1
        r4 = -1
        call MPI_Ialltoall(s, 4, MPI_INTEGER, r1, 4, MPI_INTEGER, MPI_COMM_WORLD, &
                           reqs(1), ierr)
        ok = ierr == MPI_SUCCESS
        call MPI_Igather(s, 4, MPI_INTEGER, r2, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, &
                         reqs(2), ierr)
        ok = ok .and. ierr == MPI_SUCCESS
        call MPI_Iscatter(s, 4, MPI_INTEGER, r3, 4, MPI_INTEGER, nranks - 1, &
                          MPI_COMM_WORLD, reqs(3), ierr)
        ok = ok .and. ierr == MPI_SUCCESS
        call MPI_Igatherv(s, 2, MPI_INTEGER, r4, counts, displs, MPI_INTEGER, 0, &
                          MPI_COMM_WORLD, reqs(4), ierr)
        ok = ok .and. ierr == MPI_SUCCESS
        call count(23)
        call count(24)
        call count(25)
        call count(26)
        call MPI_Waitall(4, reqs, sts, ierr)
        ok = ok .and. ierr == MPI_SUCCESS .and. all(reqs == MPI_REQUEST_NULL)
        do j = 0, nranks - 1
            do i = 1, 4
                ok = ok .and. r1(j * 4 + i) == j * 1000 + rank * 10 + i
                if (rank == 0) ok = ok .and. r2(j * 4 + i) == j * 1000 + i
            end do
            do i = 1, 2
                if (rank == 0) ok = ok .and. r4(displs(j + 1) + i) == j * 1000 + i
            end do
        end do
        do i = 1, 4
            ok = ok .and. r3(i) == (nranks - 1) * 1000 + rank * 10 + i
        end do
        call check(ok, 'ialltoall + igather + iscatter + igatherv + MPI_Waitall')
    end subroutine t_nonblocking

    ! the program's own point-to-point requests through the same wait calls:
    ! statuses converted back to Fortran (source, tag, count)
    subroutine t_p2p()
        integer :: sbuf(5), rbuf(5), reqs(2), sts(MPI_STATUS_SIZE, 2)
        integer :: st(MPI_STATUS_SIZE), left, right, cnt, idx, round
        logical :: ok
        right = mod(rank + 1, nranks)
        left = mod(rank + nranks - 1, nranks)
        do round = 1, 2
            sbuf = rank * 10 + round
            rbuf = -1
            ! the receive second: its status is the second of the array
            call MPI_Isend(sbuf, 5 - round, MPI_INTEGER, right, 40 + rank, &
                           MPI_COMM_WORLD, reqs(1), ierr)
            call MPI_Irecv(rbuf, 5, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, &
                           MPI_COMM_WORLD, reqs(2), ierr)
            if (round == 1) then
                call MPI_Waitall(2, reqs, sts, ierr)
                st = sts(:, 2)
            else
                idx = 0
                do while (idx /= 2 .and. idx /= MPI_UNDEFINED .and. ierr == MPI_SUCCESS)
                    call MPI_Waitany(2, reqs, idx, st, ierr)
                end do
                call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
            end if
            call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
            ok = ierr == MPI_SUCCESS .and. st(MPI_SOURCE) == left &
                 .and. st(MPI_TAG) == 40 + left .and. cnt == 5 - round &
                 .and. all(rbuf(1:cnt) == left * 10 + round) &
                 .and. all(reqs == MPI_REQUEST_NULL)
            call check(ok, 'isend/irecv: the status of the receive')
        end do
    end subroutine t_p2p

    ! ierror: what the MPI library's own Fortran binding returns (PMPI_X,
    ! which collar does not wrap), under MPI_ERRORS_RETURN; arguments every
    ! library checks (MPICH 4.0.2 does not check a negative count)
    subroutine t_errors()
        integer :: a(4), b(4), req, e1, e2
        a = 1
        call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
        call MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN, ierr)
        call MPI_Allreduce(a, b, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_NULL, e1)
        call PMPI_Allreduce(a, b, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_NULL, e2)
        call same_error(e1, e2, 'allreduce on MPI_COMM_NULL')
        call MPI_Allreduce(a, b, 4, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, e1)
        call PMPI_Allreduce(a, b, 4, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, e2)
        call same_error(e1, e2, 'allreduce of MPI_DATATYPE_NULL')
        call MPI_Iallreduce(a, b, 4, MPI_INTEGER, MPI_OP_NULL, MPI_COMM_WORLD, req, e1)
        call PMPI_Iallreduce(a, b, 4, MPI_INTEGER, MPI_OP_NULL, MPI_COMM_WORLD, req, e2)
        call same_error(e1, e2, 'iallreduce with MPI_OP_NULL')
        call MPI_Bcast(a, 4, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD, e1)
        call PMPI_Bcast(a, 4, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD, e2)
        call same_error(e1, e2, 'bcast of MPI_DATATYPE_NULL')
        call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, ierr)
        call MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL, ierr)
    end subroutine t_errors

    subroutine same_error(e1, e2, what)
        integer, intent(in) :: e1, e2
        character(len=*), intent(in) :: what
        integer :: c1, c2, ierr2
        c1 = -1
        c2 = -2
        if (e1 /= MPI_SUCCESS) call MPI_Error_class(e1, c1, ierr2)
        if (e2 /= MPI_SUCCESS) call MPI_Error_class(e2, c2, ierr2)
        call check(e1 /= MPI_SUCCESS .and. c1 == c2, &
                   what // ': ierror of the MPI library''s class')
    end subroutine same_error

end program test_fortran
