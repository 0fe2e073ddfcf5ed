! Fortran collectives through include 'mpif.h' (fortran.test): the same
! output as test_fortran.f90 ("test_fortran_mpif: rank R: N passed, M
! failed", then rank 0's calls per collective), fewer cases.
program test_fortran_mpif
    implicit none
    include 'mpif.h'
    integer, parameter :: n = 100003
    integer :: rank, nranks, ierr, npass, nfail, i, r, req, reqs(2)
    integer :: nallreduce, niallreduce, nbcast, nallgather, nreduce
    integer, allocatable :: a(:), b(:), g(:)
    double precision, allocatable :: x(:), y(:)
    logical :: ok, flag

    npass = 0
    nfail = 0
    nallreduce = 0
    niallreduce = 0
    nbcast = 0
    nallgather = 0
    nreduce = 0
    call MPI_INIT(ierr)
    call check(ierr == MPI_SUCCESS, 'MPI_INIT ierror')
    call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
    call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
    allocate (a(n), b(n), g(2 * nranks), x(n), y(n))
    do i = 1, n
        a(i) = rank * 5 + i
        x(i) = dble(rank + 1) * 0.5d0 + dble(mod(i, 31))
    end do

    ! integer sum, then in place
    b = -1
    call MPI_ALLREDUCE(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    nallreduce = nallreduce + 1
    ok = ierr == MPI_SUCCESS
    do i = 1, n
        ok = ok .and. b(i) == 5 * (nranks * (nranks - 1) / 2) + nranks * i
    end do
    call check(ok, 'allreduce integer sum')
    b = a
    call MPI_ALLREDUCE(MPI_IN_PLACE, b, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
    nallreduce = nallreduce + 1
    ok = ierr == MPI_SUCCESS
    do i = 1, n
        ok = ok .and. b(i) == (nranks - 1) * 5 + i
    end do
    call check(ok, 'allreduce integer max in place')

    ! double precision, nonblocking: MPI_WAIT, then MPI_WAITALL with MPI_TEST
    y = -1.0d0
    call MPI_IALLREDUCE(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, req, ierr)
    niallreduce = niallreduce + 1
    ok = ierr == MPI_SUCCESS
    call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
    ok = ok .and. ierr == MPI_SUCCESS .and. req == MPI_REQUEST_NULL
    do i = 1, n
        ok = ok .and. abs(y(i) - ref(i)) <= 1.0d-12 * abs(ref(i))
    end do
    call check(ok, 'iallreduce double precision sum + MPI_WAIT')
    b = -1
    call MPI_IALLREDUCE(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_IALLREDUCE(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                        MPI_COMM_WORLD, reqs(2), ierr)
    niallreduce = niallreduce + 2
    call MPI_TEST(reqs(1), flag, MPI_STATUS_IGNORE, ierr)
    ok = ierr == MPI_SUCCESS
    call MPI_WAITALL(2, reqs, MPI_STATUSES_IGNORE, ierr)
    ok = ok .and. ierr == MPI_SUCCESS .and. reqs(1) == MPI_REQUEST_NULL &
            .and. reqs(2) == MPI_REQUEST_NULL
    do i = 1, n
        ok = ok .and. b(i) == 5 * (nranks * (nranks - 1) / 2) + nranks * i &
                .and. abs(x(i) - ref(i)) <= 1.0d-12 * abs(ref(i))
    end do
    call check(ok, 'iallreduce x2 (one in place) + MPI_TEST + MPI_WAITALL')

    ! bcast from the last rank
    b = merge(a, -1, rank == nranks - 1)
    call MPI_BCAST(b, n, MPI_INTEGER, nranks - 1, MPI_COMM_WORLD, ierr)
    nbcast = nbcast + 1
    ok = ierr == MPI_SUCCESS
    do i = 1, n
        ok = ok .and. b(i) == (nranks - 1) * 5 + i
    end do
    call check(ok, 'bcast integer')

    ! allgather of two integers a rank
    g = -1
    call MPI_ALLGATHER(a, 2, MPI_INTEGER, g, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    nallgather = nallgather + 1
    ok = ierr == MPI_SUCCESS
    do r = 0, nranks - 1
        ok = ok .and. g(2 * r + 1) == r * 5 + 1 .and. g(2 * r + 2) == r * 5 + 2
    end do
    call check(ok, 'allgather integer')

    ! reduce to rank 0, in place there
    if (rank == 0) then
        b = a
        call MPI_REDUCE(MPI_IN_PLACE, b, n, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    else
        call MPI_REDUCE(a, b, n, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    end if
    nreduce = nreduce + 1
    ok = ierr == MPI_SUCCESS
    if (rank == 0) then
        do i = 1, n
            ok = ok .and. b(i) == 5 * (nranks * (nranks - 1) / 2) + nranks * i
        end do
    end if
    call check(ok, 'reduce integer sum in place at the root')

    write (*, '(a,i0,a,i0,a,i0,a)') 'test_fortran_mpif: rank ', rank, ': ', &
        npass, ' passed, ', nfail, ' failed'
    if (rank == 0) then
        write (*, '(a,5(a,i0))') 'test_fortran_mpif: calls', ' allreduce ', nallreduce, &
            ' iallreduce ', niallreduce, ' bcast ', nbcast, ' allgather ', nallgather, &
            ' reduce ', nreduce
    end if
    call MPI_FINALIZE(ierr)
    if (nfail > 0) stop 1

contains

    subroutine check(good, what)
        logical, intent(in) :: good
        character(len=*), intent(in) :: what
        if (good) then
            npass = npass + 1
        else
            nfail = nfail + 1
            write (*, '(a,i0,a,a)') 'test_fortran_mpif: FAIL rank ', rank, ': ', what
        end if
    end subroutine check

    ! the float64 sum over ranks of x(i)
    double precision function ref(i)
        integer, intent(in) :: i
        integer :: q
        ref = 0.0d0
        do q = 0, nranks - 1
            ref = ref + (dble(q + 1) * 0.5d0 + dble(mod(i, 31)))
        end do
    end function ref

end program test_fortran_mpif
